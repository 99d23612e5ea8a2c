"""The chat engine on a real tiny 4-bit MLX model: load, stream, cancel, prompt cache, budget, unload."""
from __future__ import annotations

import json
import threading

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm import stream_generate

from core.errors import ModelError
from core.protocols import ChatMessage, ChatModel, GenerationChunk, SamplingParams
from models.chat import ChatEngine
from models.cpu_weights import keeps_quantized

M = ChatMessage


def test_loads_the_4bit_model(tiny_engine, tiny_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["quantization"]["bits"] == 4
    kinds = {type(m) for _, m in tiny_engine._loaded.model.named_modules()}
    assert (nn.QuantizedLinear in kinds) == keeps_quantized()  # else float32 layers on the CPU (cpu_weights)
    assert isinstance(tiny_engine, ChatModel)


def test_streams_small_chunks_with_counts(tiny_engine):
    chunks = list(tiny_engine.stream([M("user", "hello my name is Bob")], SamplingParams.greedy(12)))
    assert all(isinstance(c, GenerationChunk) for c in chunks)
    assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    last = chunks[-1]
    assert last.finish_reason in ("length", "stop")
    assert last.generation_tokens == len(chunks) == 12
    assert last.prompt_tokens == len(tiny_engine.render([M("user", "hello my name is Bob")]))
    assert last.tokens_per_second > 0
    assert "".join(c.text for c in chunks)


class SeenCancel(threading.Event):
    """A cancel flag that counts the generator's looks at it (one per token) and notes the first look that saw it
    set: the generator runs on the model's worker thread, ahead of a consumer slowed by load, so how many chunks
    the consumer has read says nothing about what the generator did after the cancel."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.seen_at_look: int | None = None

    def is_set(self) -> bool:
        seen = super().is_set()
        self.looks += 1
        if seen and self.seen_at_look is None:
            self.seen_at_look = self.looks
        return seen


def test_cancel_mid_stream_stops_within_one_token(tiny_engine):
    """What the engine promises: no token is generated after it sees the cancel (the one in hand ends the reply,
    marked cancelled), however far ahead of the reader it was."""
    cancel = SeenCancel()
    chunks = []
    for chunk in tiny_engine.stream([M("user", "tell me a long story")], SamplingParams.greedy(200), cancel=cancel):
        chunks.append(chunk)
        if len(chunks) == 5:
            cancel.set()
    assert chunks[-1].finish_reason == "cancelled"
    assert all(c.finish_reason is None for c in chunks[:-1])  # nothing after the cancelled chunk
    assert [c.generation_tokens for c in chunks] == list(range(1, len(chunks) + 1))  # one chunk a token
    assert cancel.seen_at_look is not None
    assert chunks[-1].generation_tokens == cancel.seen_at_look  # the token in hand when it saw the cancel: no more
    assert len(chunks) < 200
    # the engine is usable afterwards, and the cache mirror still matches
    again = list(tiny_engine.stream([M("user", "tell me a long story")], SamplingParams.greedy(4)))
    assert again[-1].finish_reason == "length"


def test_prompt_cache_matches_cacheless_run_over_three_turns(tiny_engine):
    conversation = [M("system", "You are a helpful assistant."), M("user", "hello, my name is Ann")]
    previous_prompt: list[int] = []
    for turn in range(3):
        chunks = list(tiny_engine.stream(conversation, SamplingParams.greedy(24)))
        cached_tokens = list(tiny_engine.last_reply_tokens)
        if turn > 0:  # the whole previous prompt came from the cache; only the new turn was processed
            assert tiny_engine.last_reused_tokens >= len(previous_prompt), "the cache was not reused"
        prompt = tiny_engine.render(conversation)
        previous_prompt = prompt
        loaded = tiny_engine._loaded
        plain = [r.token for r in stream_generate(loaded.model, loaded.tokenizer, mx.array(prompt), max_tokens=24)]
        plain = [t for t in plain if t not in loaded.tokenizer.eos_token_ids]
        assert cached_tokens == plain, f"turn {turn}"
        reply = "".join(c.text for c in chunks)
        conversation += [M("assistant", reply), M("user", f"and what about the city number {turn}?")]


def test_partial_reuse_when_history_changes(tiny_engine):
    base = [M("system", "S"), M("user", "first question about coffee")]
    list(tiny_engine.stream(base, SamplingParams.greedy(6)))
    edited = [M("system", "S"), M("user", "first question about tea")]
    list(tiny_engine.stream(edited, SamplingParams.greedy(6)))
    loaded = tiny_engine._loaded
    plain = [r.token for r in stream_generate(loaded.model, loaded.tokenizer,
                                              mx.array(tiny_engine.render(edited)), max_tokens=6)]
    assert tiny_engine.last_reply_tokens == [t for t in plain if t not in loaded.tokenizer.eos_token_ids]


def test_context_budget_drops_oldest_turns_keeps_system(tiny_engine):
    system = M("system", "memory: the user likes tea")
    history = []
    for i in range(40):
        history += [M("user", f"question {i} " + "word " * 20), M("assistant", f"answer {i} " + "word " * 20)]
    messages = [system, *history, M("user", "the newest question")]
    tokens = tiny_engine.prompt_tokens(messages, reserve=256)
    assert len(tokens) <= tiny_engine.context_window - 256
    text = tiny_engine.tokenizer.decode(tokens)
    assert "memory: the user likes tea" in text and "the newest question" in text
    assert "question 0 " not in text and "answer 39" in text
    chunks = list(tiny_engine.stream(messages, SamplingParams.greedy(8)))
    assert chunks[-1].finish_reason == "length"


def test_message_too_long_for_the_window_is_a_clear_error(tiny_engine):
    with pytest.raises(ModelError, match="context window"):
        tiny_engine.prompt_tokens([M("user", "word " * 5000)], reserve=16)


def test_bad_messages_are_rejected(tiny_engine):
    with pytest.raises(ModelError, match="empty"):
        tiny_engine.stream([], SamplingParams.greedy(4))
    with pytest.raises(ModelError, match="role"):
        tiny_engine.stream([M("robot", "hi")], SamplingParams.greedy(4))


def test_count_tokens(tiny_engine):
    assert tiny_engine.count_tokens("") == 0
    assert 0 < tiny_engine.count_tokens("hello world") <= len("hello world")


def test_sampling_with_seed_is_reproducible(tiny_engine):
    sampling = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=10, seed=7)
    first = "".join(c.text for c in tiny_engine.stream([M("user", "hi")], sampling))
    second = "".join(c.text for c in tiny_engine.stream([M("user", "hi")], sampling))
    assert first == second


def test_unload_frees_and_refuses_further_use(tiny_model_dir, tiny_engine):
    def active() -> int:  # MLX's own count of the bytes its arrays hold, read on its thread
        return tiny_engine.worker.call(lambda: mx.get_active_memory())
    before = active()
    engine = ChatEngine.load(tiny_model_dir, worker=tiny_engine.worker)
    list(engine.stream([M("user", "hi")], SamplingParams.greedy(3)))
    weights = sum(p.stat().st_size for p in tiny_model_dir.glob("*.safetensors"))
    assert active() - before >= 0.9 * weights  # the second copy of the model really is in memory
    engine.unload()
    assert active() - before < 0.1 * weights  # and after unloading it is not
    assert not engine.loaded
    with pytest.raises(ModelError, match="No chat model"):
        engine.stream([M("user", "hi")], SamplingParams.greedy(3))
    assert tiny_engine.worker.alive  # a shared worker outlives the engines on it
