"""A model folder's tokenizer over the `tokenizers` library and jinja2, without transformers (0.7 s of imports).

It offers what Engram uses of mlx-lm's TokenizerWrapper, with the same results: encode/decode, the chat template
rendered as transformers renders it, the eos ids mlx-lm gathers, the special and added tokens, the vocabulary,
the backend `tokenizers.Tokenizer` (for llguidance) and a streaming detokenizer (models.detokenize). The backend
is tokenizer.json as saved; transformers 5 rebuilds some families' pipelines in code (Qwen2Tokenizer, ...) from
the same vocabulary and merges. A folder this cannot read the same way — no tokenizer.json, mlx-lm's own chat
renderers (`chat_template_type`), custom tokenizer code — gets mlx-lm's tokenizer instead (`load_tokenizer`).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from core.errors import ModelError

from models.detokenize import StreamingDetokenizer, detokenizer_factory
from models.template_sandbox import compile_template

# Descriptor 2 is the process's, so its holding (without_panic) is serialised process-wide: two threads
# holding it at once would each put back the other's copy.
STDERR_HELD = threading.Lock()
NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_OWN_TOKENIZER_CLASSES = ("NewlineTokenizer",)  # mlx-lm's subclass that rewrites newlines


class ChatTokenizer:
    def __init__(self, backend: Any, config: Mapping[str, Any], *, chat_template: Any,
                 eos_token_ids: Iterable[int], detokenizer_class: Any) -> None:
        self.backend_tokenizer = backend
        self.chat_template = chat_template
        self._named = {key: _token_text(config.get(key)) for key in NAMED_SPECIAL if config.get(key) is not None}
        self._named.update(_model_specific_tokens(config))
        self._extra = [_token_text(t) for t in _extra_special(config)]
        self._add_missing_special_tokens()
        self._clean_up_spaces = bool(config.get("clean_up_tokenization_spaces", False))
        self._eos_token_ids = set(eos_token_ids)
        if self.eos_token_id is not None:
            self._eos_token_ids.add(self.eos_token_id)
        self._template: Any = None
        self._held: Any = None
        self._detokenizer = detokenizer_class(self)

    # -- encoding ------------------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if self._held is None:  # where a panic's own lines are held back (without_panic); made once
            self._held = tempfile.TemporaryFile()
        return without_panic(lambda: self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids,
                             self._held)

    def decode(self, ids: Iterable[int] | int, skip_special_tokens: bool = False) -> str:
        ids = [ids] if isinstance(ids, int) else [int(i) for i in ids]
        text = self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        if self._clean_up_spaces and type(self.backend_tokenizer.model).__name__ != "BPE":  # as transformers 5
            text = clean_up_tokenization(text)
        return text

    def convert_ids_to_tokens(self, ids: Iterable[int] | int) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.backend_tokenizer.token_to_id(token)

    def apply_chat_template(self, messages: list[Mapping[str, Any]], *, add_generation_prompt: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> Any:
        """The conversation through the chat template (special tokens as variables, extra kwargs such as
        enable_thinking passed on), encoded without adding special tokens, as transformers does."""
        if self._template is None:
            self._template = BoundedTemplate(self.chat_template, self.special_tokens_map)
        rendered = self._template(messages, add_generation_prompt=add_generation_prompt, **kwargs)
        return self.encode(rendered, add_special_tokens=False) if tokenize else rendered

    # -- special tokens ------------------------------------------------------------------------------

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return dict(self._named)

    @property
    def all_special_tokens(self) -> list[str]:
        return list(dict.fromkeys([*self._named.values(), *self._extra]))

    @property
    def all_special_ids(self) -> list[int | None]:
        return [self.convert_tokens_to_ids(t) for t in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, Any]:
        return self.backend_tokenizer.get_added_tokens_decoder()

    def _add_missing_special_tokens(self) -> None:
        """transformers adds any special token tokenizer_config names that tokenizer.json lacks."""
        from tokenizers import AddedToken
        known = {token.content for token in self.added_tokens_decoder.values()}
        missing = [t for t in self.all_special_tokens if t not in known]
        if missing:
            self.backend_tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                                       for t in missing])

    def __getattr__(self, name: str) -> Any:
        # bos_token, eos_token_id, pad_token... as transformers names them; None when the config names none
        base = name.removesuffix("_id")
        if base in NAMED_SPECIAL or base in self.__dict__.get("_named", {}):
            token = self._named.get(base)
            return token if base == name or token is None else self.convert_tokens_to_ids(token)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- vocabulary, eos, streaming ------------------------------------------------------------------

    @property
    def eos_token_ids(self) -> set[int]:
        return self._eos_token_ids

    @property
    def vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self.vocab

    @property
    def vocab_size(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=False)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def detokenizer(self) -> StreamingDetokenizer:
        """A fresh streaming detokenizer (a copy of one built once: building the token map is costly)."""
        import copy
        detokenizer = copy.copy(self._detokenizer)
        detokenizer.reset()
        return detokenizer


class BoundedTemplate:
    """A chat template rendered as transformers renders it (special tokens as variables, extra kwargs such as
    enable_thinking passed on), in Engram's bounded sandbox (compile_template): ChatTokenizer's, and the one handed
    to mlx-lm's tokenizer for a folder read through transformers, whose own sandbox lets a template build a 10 GB
    string."""

    def __init__(self, template: Any, special_tokens: Mapping[str, Any]) -> None:
        self.template = template  # one source, or several by name (the one named 'default' is used)
        self.special_tokens = dict(special_tokens)
        self._compiled: Any = None

    def __call__(self, messages: list[Mapping[str, Any]], add_generation_prompt: bool = False, **kwargs: Any) -> str:
        if self._compiled is None:
            self._compiled = compile_template(_default_template(self.template))
        return self._compiled.render(messages=[_without_none(m) for m in messages], tools=None, documents=None,
                                     add_generation_prompt=add_generation_prompt,
                                     **{**self.special_tokens, **kwargs})


def _default_template(template: Any) -> str:
    if isinstance(template, dict):
        if "default" not in template:
            raise ValueError("This model has several chat templates and none is named 'default'.")
        template = template["default"]
    if not template:
        raise ValueError("This tokenizer has no chat template.")
    return template


def without_panic(call: Callable[[], Any], held: Any) -> Any:
    """`call()` into the tokenizers library, whose Rust code panics on some inputs (a tokenizer.json regex past
    Oniguruma's retry limit): the panic becomes one ModelError, and the lines Rust writes about it straight to the
    process's standard error are held back in `held` (a temporary file). Whatever else reached standard error
    meanwhile is passed on."""
    with STDERR_HELD:
        saved = _hold_stderr(held)
        panicked = False
        try:
            return call()
        except BaseException as exc:
            if type(exc).__name__ != "PanicException":
                raise
            panicked = True
            reason = (str(exc).strip().splitlines() or ["a native error"])[-1][:200]
            raise ModelError(f"The model's tokenizer failed on this text ({reason}); nothing was sent to the "
                             "model. Try other words, or choose another model.") from None
        finally:
            if saved is not None:
                _release_stderr(saved, held, passed_on=not panicked)


def _hold_stderr(held: Any) -> int | None:
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        return None  # no descriptor 2 here: nothing to hold
    os.dup2(held.fileno(), 2)
    return saved


def _release_stderr(saved: int, held: Any, *, passed_on: bool) -> None:
    os.dup2(saved, 2)
    os.close(saved)
    if held.tell():
        held.seek(0)
        if passed_on:
            os.write(2, held.read())
        held.seek(0)
        held.truncate()


def load_tokenizer(folder: Path | str, eos_token_ids: Any = None, defaults: Mapping[str, Any] | None = None) -> Any:
    """The folder's tokenizer as mlx_lm.utils.load_tokenizer gives it: eos ids from the model config (else the model
    module's TOKENIZER_DEFAULTS) plus the tokenizer's own eos token."""
    folder = Path(folder)
    config = _read_json(folder / "tokenizer_config.json")
    defaults = defaults or {}
    if not _readable_here(folder, config, defaults):
        from mlx_lm.utils import load_tokenizer as mlx_lm_load_tokenizer
        return _bounded(mlx_lm_load_tokenizer(folder, eos_token_ids=eos_token_ids))
    from tokenizers import Tokenizer
    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))  # truncation and padding as the file sets them
    decoder = json.loads(backend.decoder.__getstate__()) if backend.decoder is not None else None
    if eos_token_ids is None:
        eos_token_ids = defaults.get("eos_token_ids")
    if isinstance(eos_token_ids, int):
        eos_token_ids = [eos_token_ids]
    return ChatTokenizer(backend, config, chat_template=_chat_template(folder, config),
                         eos_token_ids=eos_token_ids or [], detokenizer_class=detokenizer_factory(decoder))


def _bounded(wrapper: Any) -> Any:
    """mlx-lm's tokenizer with its jinja chat template rendered by BoundedTemplate (mlx-lm's own Python renderers,
    chosen by chat_template_type, stay)."""
    template = getattr(wrapper._tokenizer, "chat_template", None)  # noqa: SLF001 - mlx-lm's hook for a renderer
    if wrapper._chat_template is None and isinstance(template, (str, dict)) and template:  # noqa: SLF001
        wrapper._chat_template = BoundedTemplate(template, wrapper._tokenizer.special_tokens_map)  # noqa: SLF001
    return wrapper


def _readable_here(folder: Path, config: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
    return ((folder / "tokenizer.json").is_file() and "auto_map" not in config
            and not config.get("chat_template_type", defaults.get("chat_template_type"))
            and config.get("tokenizer_class") not in _OWN_TOKENIZER_CLASSES)


def _chat_template(folder: Path, config: Mapping[str, Any]) -> Any:
    """chat_template.jinja (and additional_chat_templates/*.jinja) before tokenizer_config's, as transformers."""
    templates = {}
    if (folder / "chat_template.jinja").is_file():
        templates["default"] = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    for path in sorted((folder / "additional_chat_templates").glob("*.jinja")):
        templates[path.stem] = path.read_text(encoding="utf-8")
    if templates:
        return templates["default"] if list(templates) == ["default"] else templates
    template = config.get("chat_template")
    if isinstance(template, list):
        return {entry["name"]: entry["template"] for entry in template}
    return template


def clean_up_tokenization(text: str) -> str:
    """transformers' clean-up of spaces before punctuation and contractions (WordPiece-era decoders)."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


def _token_text(value: Any) -> str:
    return value["content"] if isinstance(value, Mapping) else str(value)


def _extra_special(config: Mapping[str, Any]) -> list[Any]:
    extra = config.get("extra_special_tokens", config.get("additional_special_tokens")) or []
    return list(extra) if isinstance(extra, (list, tuple)) else []


def _model_specific_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    """Named tokens beyond the standard ones (`image_token`, or extra_special_tokens given as a dict)."""
    named = {k: _token_text(v) for k, v in config.items()
             if k.endswith("_token") and k not in NAMED_SPECIAL and isinstance(v, (str, Mapping))
             and (isinstance(v, str) or "content" in v)}
    extra = config.get("extra_special_tokens", config.get("additional_special_tokens"))
    if isinstance(extra, Mapping):
        named.update({k: _token_text(v) for k, v in extra.items()})
    return named


def _without_none(message: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if value is not None}


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
