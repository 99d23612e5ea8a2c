"""The MLX chat engine over mlx-lm's model code: load/unload, chat template, sampling, streaming, prompt-cache reuse,
context budget and LoRA adapters. Implements core.protocols.ChatModel.

All MLX work runs on one MLXWorker thread. The KV cache of the previous turn is kept with a mirror of the
token ids it holds: a new prompt reuses the longest common prefix and the rest is trimmed, so a long
conversation is not re-read every turn; the output is the same as a run without the cache. Loading and
generating import no transformers (models.mlx_loader, chat_tokenizer, generation): a cold start pays ~0.05 s of
imports for them, not the ~0.8 s of `import mlx_lm`.
"""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from core.errors import ModelError
from core.protocols import ChatMessage, GenerationChunk, SamplingParams
from models import lora
from models.chat_tokenizer import load_tokenizer
from models.checks import check_model_folder
from models.cpu_weights import dequantize_for_cpu
from models.generation import new_stream, stream_pieces
from models.mlx_loader import load_model, tokenizer_defaults
from models.mlx_requirements import require_mlx
from models.prompt_cache import common_prefix
from models.prompt_text import ThinkFilter, control_markers, render_prompt
from models.repetition import RepetitionGuard
from models.worker import MLXWorker

ROLES = ("system", "user", "assistant")


@dataclass
class _Loaded:
    """What lives on the worker thread: the model, its tokenizer and the prompt-cache mirror."""
    model: Any
    tokenizer: Any
    config: dict
    cache: list | None = None
    cached_tokens: list[int] = field(default_factory=list)
    adapter: Path | None = None
    markers: tuple[str, ...] = ()  # the tokenizer's control markers, broken wherever they appear in content
    thinks: bool = False  # a reasoning model (Qwen3): <think> blocks are taken out of the reply
    stream: Any = None  # the MLX stream generation runs on (made on the worker thread)


class ChatEngine:
    def __init__(self, loaded: _Loaded, *, path: Path, worker: MLXWorker, context_tokens: int,
                 owns_worker: bool, use_prompt_cache: bool = True) -> None:
        self._loaded: _Loaded | None = loaded
        self._worker = worker
        self._owns_worker = owns_worker
        self.path = path
        self.use_prompt_cache = use_prompt_cache
        self._window = int(loaded.config.get("max_position_embeddings") or context_tokens)
        self.context_window = min(context_tokens, self._window)
        self.last_reply_tokens: list[int] = []  # token ids of the last reply, for inspection and tests
        self.last_reused_tokens = 0  # prompt tokens of the last reply served from the prompt cache

    def set_context_tokens(self, tokens: int) -> None:
        """The context length the user chose for this model (never more than its own window)."""
        self.context_window = min(int(tokens), self._window)

    @classmethod
    def load(cls, folder: Path | str, *, worker: MLXWorker | None = None, context_tokens: int = 8192,
             total_ram: int | None = None, use_prompt_cache: bool = True) -> "ChatEngine":
        """Check the folder, then load it on the worker (a new worker unless one is given)."""
        folder = Path(folder)
        check_model_folder(folder, total_ram=total_ram)
        require_mlx()  # an older mlx fails here in one line, not at the first reply
        owns_worker = worker is None
        worker = worker or MLXWorker()
        try:
            loaded = worker.call(_load, folder)
        except BaseException:
            if owns_worker:
                worker.close()
            raise
        return cls(loaded, path=folder, worker=worker, context_tokens=context_tokens, owns_worker=owns_worker,
                   use_prompt_cache=use_prompt_cache)

    # -- ChatModel ---------------------------------------------------------------------------------

    def stream(self, messages: Sequence[ChatMessage], sampling: SamplingParams, *,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        loaded = self._require_loaded()
        max_tokens = _checked_max_tokens(sampling.max_tokens, self.context_window)
        prompt = self.prompt_tokens(messages, reserve=max_tokens)
        cancel = cancel or threading.Event()
        return self._worker.stream(lambda stop: self._generate(loaded, prompt, sampling, max_tokens, cancel, stop))

    def count_tokens(self, text: str) -> int:
        return len(self._require_loaded().tokenizer.encode(text, add_special_tokens=False))

    # -- prompt and budget -------------------------------------------------------------------------

    def render(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt ids; message content is data, so no control token can come from it (models.prompt_text)."""
        _check_messages(messages)
        loaded = self._require_loaded()
        as_dicts = [{"role": m.role, "content": m.content} for m in messages]
        return render_prompt(loaded.tokenizer, as_dicts, loaded.markers)

    def prompt_tokens(self, messages: Sequence[ChatMessage], *, reserve: int) -> list[int]:
        """The templated prompt, dropping the oldest turns until it and `reserve` reply tokens fit the window.

        System messages (identity, memory context) and the newest message are never dropped.
        """
        budget = self.context_window - reserve
        kept = list(messages)
        tokens = self.render(kept)
        while len(tokens) > budget:
            droppable = [i for i, m in enumerate(kept[:-1]) if m.role != "system"]
            if not droppable:
                raise ModelError(f"The message and memory context need {len(tokens)} tokens but only {budget} "
                                 f"fit in this model's context window; shorten the message.")
            del kept[droppable[0]]
            tokens = self.render(kept)
        return tokens

    # -- adapters ------------------------------------------------------------------------------------

    @property
    def adapter(self) -> Path | None:
        return self._require_loaded().adapter

    def load_adapter(self, adapter_dir: Path | str) -> None:
        """Apply a LoRA adapter (replacing any active one); the prompt cache is dropped since outputs change."""
        loaded = self._require_loaded()
        self._worker.call(_set_adapter, loaded, Path(adapter_dir))

    def remove_adapter(self) -> None:
        loaded = self._require_loaded()
        self._worker.call(_set_adapter, loaded, None)

    def run(self, fn: Callable[[Any, Any], Any]) -> Any:
        """Run fn(model, tokenizer) on the MLX thread (used by structured generation)."""
        loaded = self._require_loaded()
        return self._worker.call(fn, loaded.model, loaded.tokenizer)

    @property
    def worker(self) -> MLXWorker:
        return self._worker

    @property
    def tokenizer(self) -> Any:
        return self._require_loaded().tokenizer

    @property
    def generation_stream(self) -> Any:
        """The MLX stream this engine generates on; use it only on the worker (run, stream)."""
        return self._require_loaded().stream

    # -- lifetime ------------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def unload(self) -> None:
        """Drop the model, its cache and MLX's buffer cache; later calls raise ModelError."""
        loaded, self._loaded = self._loaded, None
        if loaded is not None and self._worker.alive:
            self._worker.call(_free, loaded)
        if self._owns_worker:
            self._worker.close()

    def _require_loaded(self) -> _Loaded:
        if self._loaded is None:
            raise ModelError("No chat model is loaded.")
        return self._loaded

    # -- generation (runs on the worker) -------------------------------------------------------------

    def _generate(self, loaded: _Loaded, prompt: list[int], sampling: SamplingParams, max_tokens: int,
                  cancel: threading.Event, stop: threading.Event) -> Iterator[GenerationChunk]:
        import mlx.core as mx
        from mlx_lm.sample_utils import make_sampler  # mlx only (models.mlx_lm_package keeps mlx-lm's __init__ out)

        if sampling.seed is not None:
            mx.random.seed(sampling.seed)
        suffix = _reuse_cache(loaded, prompt) if self.use_prompt_cache else _fresh_cache(loaded, prompt)
        self.last_reused_tokens = len(prompt) - len(suffix)
        sampler = make_sampler(temp=sampling.temperature, top_p=sampling.top_p if sampling.temperature else 0.0)
        generated: list[int] = []
        shown = ThinkFilter() if loaded.thinks else None
        assert loaded.cache is not None  # _reuse_cache and _fresh_cache leave one
        steps = stream_pieces(loaded.model, loaded.tokenizer, mx.array(suffix), cache=loaded.cache,
                              stream=loaded.stream, max_tokens=max_tokens, sampler=sampler)
        started = time.perf_counter()
        looping = RepetitionGuard()  # a small model that starts repeating itself does not stop by itself
        try:
            for piece in steps:
                generated.append(piece.token)
                rate = len(generated) / max(time.perf_counter() - started, 1e-9)
                text = _visible(shown, piece.text, final=piece.finish_reason is not None)
                if cancel.is_set() or stop.is_set():
                    yield GenerationChunk(text, len(prompt), len(generated), rate, "cancelled")
                    return
                if piece.finish_reason is None and looping.add(piece.token, piece.text):
                    yield GenerationChunk(text, len(prompt), len(generated), rate, "repetition")
                    return
                yield GenerationChunk(text, len(prompt), len(generated), rate, piece.finish_reason)
        finally:
            steps.close()
            self.last_reply_tokens = [t for t in generated if t not in loaded.tokenizer.eos_token_ids]
            _sync_mirror(loaded, prompt + generated)


def _load(folder: Path) -> _Loaded:
    try:
        model, config = load_model(folder)
        dequantize_for_cpu(model)  # Linux: quantized products are slow loops on MLX's CPU backend
        tokenizer = load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"), defaults=tokenizer_defaults(model))
    except Exception as exc:  # a bad folder raises several types (ValueError, KeyError, OSError...)
        raise ModelError(f"The model in {folder} could not be loaded: {exc}") from exc
    markers = control_markers(tokenizer)
    thinks = "<think>" in markers or "<think>" in str(getattr(tokenizer, "chat_template", "") or "")
    return _Loaded(model=model, tokenizer=tokenizer, config=config, markers=markers, thinks=thinks,
                   stream=new_stream())


def _visible(shown: ThinkFilter | None, text: str, *, final: bool) -> str:
    if shown is None:
        return text
    return shown.feed(text) + (shown.finish() if final else "")


def _free(loaded: _Loaded) -> None:
    import mlx.core as mx
    loaded.model = loaded.tokenizer = loaded.cache = None
    loaded.cached_tokens = []
    if gc.isenabled():  # otherwise the GUI collects (app.ui.gc): a Qt object must not be freed on this thread
        gc.collect()
    mx.clear_cache()


def _set_adapter(loaded: _Loaded, adapter_dir: Path | None) -> None:
    if loaded.adapter is not None:
        lora.remove_adapter(loaded.model)
        loaded.adapter = None
    if adapter_dir is not None:
        lora.apply_adapter(loaded.model, adapter_dir)
        loaded.adapter = adapter_dir
    loaded.cache, loaded.cached_tokens = None, []


def _fresh_cache(loaded: _Loaded, prompt: list[int]) -> list[int]:
    from mlx_lm.models.cache import make_prompt_cache
    loaded.cache, loaded.cached_tokens = make_prompt_cache(loaded.model), []
    return prompt


def _reuse_cache(loaded: _Loaded, prompt: list[int]) -> list[int]:
    """Trim the cache to the longest common prefix with `prompt`; return the tokens still to process."""
    from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache
    if loaded.cache is None or not can_trim_prompt_cache(loaded.cache):
        return _fresh_cache(loaded, prompt)
    common = common_prefix(loaded.cached_tokens, prompt)
    common = min(common, len(prompt) - 1)  # the model must see at least one new token to produce logits
    trim_prompt_cache(loaded.cache, len(loaded.cached_tokens) - common)
    loaded.cached_tokens = loaded.cached_tokens[:common]
    return prompt[common:]


def _sync_mirror(loaded: _Loaded, seen: list[int]) -> None:
    """Record which tokens the cache now holds (the cache may run one token past what was yielded)."""
    from mlx_lm.models.cache import trim_prompt_cache
    cache = loaded.cache or []
    offset = cache[0].offset if cache else 0
    if offset > len(seen):
        trim_prompt_cache(cache, offset - len(seen))
        offset = len(seen)
    loaded.cached_tokens = seen[:offset]


def _check_messages(messages: Sequence[ChatMessage]) -> None:
    if not messages:
        raise ModelError("There is nothing to answer: the conversation is empty.")
    for message in messages:
        if message.role not in ROLES:
            raise ModelError(f"Unknown message role {message.role!r}; use one of {', '.join(ROLES)}.")


def _checked_max_tokens(max_tokens: int, window: int) -> int:
    if max_tokens < 1:
        raise ModelError("max_tokens must be at least 1.")
    return min(max_tokens, window // 2)
