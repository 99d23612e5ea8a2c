"""Token generation as mlx-lm's generate_step and stream_generate do it, without their module (which imports
transformers): the prompt is read into the KV cache in chunks, then each step samples a token while the next
step is already queued (mx.async_eval), so the device never waits for Python. Logits processors (llguidance's
grammar mask) see every token so far. Greedy output is token for token mlx-lm's (tests/test_generation.py).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Sequence

from core.errors import ModelError

PREFILL_STEP = 2048  # prompt tokens per forward pass while reading the prompt (mlx-lm's default)


@dataclass(frozen=True)
class Piece:
    """One generated token and the text it made readable; the last piece has a finish_reason."""
    token: int
    text: str
    finish_reason: str | None = None


def new_stream() -> Any:
    """A stream on the default device for generation, as mlx-lm keeps one (made on the thread that generates)."""
    import mlx.core as mx
    return mx.new_thread_local_stream(mx.default_device())


def generate_tokens(model: Any, prompt: Any, *, cache: list, stream: Any, max_tokens: int,
                    sampler: Callable | None = None,
                    logits_processors: Sequence[Callable] = ()) -> Generator[int, None, None]:
    """Token ids after `prompt` (an mx.array of the ids the cache has not read yet), at most max_tokens."""
    import mlx.core as mx
    check_ids_fit(model, prompt)
    sampler = sampler or (lambda logprobs: mx.argmax(logprobs, axis=-1))
    seen = None  # every token so far, for the logits processors

    def step(tokens: Any) -> tuple[Any, Any]:
        nonlocal seen
        with mx.stream(stream):
            logits = model(tokens[None], cache=cache)[:, -1, :]
            if logits_processors:
                seen = mx.concat([seen, tokens]) if seen is not None else tokens
                for processor in logits_processors:
                    logits = processor(seen, logits)
            logprobs = logits - mx.logsumexp(logits, keepdims=True)
            return sampler(logprobs), logprobs.squeeze(0)

    def read(chunk: Any) -> None:
        nonlocal seen
        if logits_processors:
            seen = mx.concat([seen, chunk]) if seen is not None else chunk

    with mx.stream(stream):
        prompt = read_prompt(model, prompt, cache, on_chunk=read)
        y, logprobs = step(prompt)
        mx.async_eval(y, logprobs)
        n = 0
        while True:
            if n != max_tokens:
                next_y, next_logprobs = step(y)
                mx.async_eval(next_y, next_logprobs)
            if n == 0:
                mx.eval(y)
            if n == max_tokens:
                break
            yield y.item()
            if n % 256 == 0:
                mx.clear_cache()
            y, logprobs = next_y, next_logprobs
            n += 1


def read_prompt(model: Any, prompt: Any, cache: list, *, on_chunk: Callable[[Any], None] | None = None) -> Any:
    """Read all but the last prompt token into the cache, a chunk at a time (on the caller's stream); the rest."""
    import mlx.core as mx
    while len(prompt) > 1:
        chunk = prompt[: min(PREFILL_STEP, len(prompt) - 1)]
        model(chunk[None], cache=cache)
        mx.eval([c.state for c in cache])
        if on_chunk is not None:
            on_chunk(chunk)
        prompt = prompt[len(chunk):]
        mx.clear_cache()
    return prompt


def check_ids_fit(model: Any, prompt: Any) -> None:
    """Every prompt id has a row in the model's embedding. MLX does not check: a tokenizer that maps some text past
    the table (a mismatched or hostile model folder) read out of bounds, and crashed the app once the id was large."""
    if not prompt.size:
        return
    rows = embedding_rows(model)
    largest = int(prompt.max().item())
    if rows is not None and largest >= rows:
        raise ModelError(f"This model's tokenizer gives token {largest}, but its weights hold {rows} tokens: the "
                         "model's files do not belong together. Choose another model.")


def embedding_rows(model: Any) -> int | None:
    """The rows of the model's token embedding, or None when it has none: the largest Embedding module (a position
    table, GPT-2's wpe, is smaller than the vocabulary; taking the largest never refuses a real token)."""
    import mlx.nn as nn
    # mlx-lm's models say the table's size, which strict loading bound to the weights: no 2.5 ms walk of the modules
    said = getattr(getattr(model, "args", None), "vocab_size", None)
    if isinstance(said, int) and not isinstance(said, bool):
        return said
    rows = [int(module.weight.shape[0]) for _, module in model.named_modules()
            if isinstance(module, (nn.Embedding, nn.QuantizedEmbedding))]
    return max(rows, default=None)


def stream_pieces(model: Any, tokenizer: Any, prompt: Any, *, cache: list, stream: Any, max_tokens: int,
                  sampler: Callable | None = None,
                  logits_processors: Sequence[Callable] = ()) -> Generator[Piece, None, None]:
    """What mlx_lm.stream_generate yields, token and text: generation stops at an eos token (yielded last, with no
    text, finish "stop") or after max_tokens (finish "length")."""
    detokenizer = tokenizer.detokenizer
    eos = tokenizer.eos_token_ids
    token, n = None, 0
    with wired_limit(model, stream):
        tokens = generate_tokens(model, prompt, cache=cache, stream=stream, max_tokens=max_tokens, sampler=sampler,
                                 logits_processors=logits_processors)
        try:
            for n, token in enumerate(tokens):
                if token in eos:
                    break
                detokenizer.add_token(token)
                if n + 1 == max_tokens:
                    break
                yield Piece(token, detokenizer.last_segment)
        finally:
            tokens.close()
        if token is None:
            return
        detokenizer.finalize()
        yield Piece(token, detokenizer.last_segment, "stop" if token in eos else "length")


@contextlib.contextmanager
def wired_limit(model: Any, stream: Any) -> Iterator[None]:
    """On a Mac, keep the model's memory wired while generating (mlx-lm's wired_limit); elsewhere nothing."""
    import mlx.core as mx
    limit = mx.device_info().get("max_recommended_working_set_size")
    if limit is None:
        yield
        return
    old = mx.set_wired_limit(int(limit))
    try:
        yield
    finally:
        mx.synchronize(stream)
        mx.set_wired_limit(old)
