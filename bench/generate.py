"""Generation benchmark: prints JSON.

1. Engram's streaming (ChatEngine on its MLX thread, chunks handed across a queue) against plain
   mlx_lm.stream_generate on the same model, prompt and greedy settings, in this run. Target ratio >= 0.97.
2. The per-token cost of JSON-Schema-constrained generation (models.constrained: llguidance's mask where the model
   has a choice, forced tokens read without one) with a realistic 131,072-token vocabulary: end to end against
   unconstrained generation on the same model, and the time spent inside the grammar itself per token produced
   (check the model's choice, fill llguidance's bitmask and mask, consume, forced tokens; the forward pass is not
   counted).
3. Time to the first token of a conversation's next turn (a ~700-token memory context, the first turn and its
   reply, a follow-up question): Engram with its prompt cache, as the product runs, which still holds the first
   turn, against plain mlx_lm.stream_generate reading the whole prompt; interleaved, medians. The streaming runs
   above use the prompt cache too; their rate is counted from the first token, so it does not change them.

The models are built locally (random 4-bit qwen2 weights, a BPE tokenizer trained here): no network.
Run: cd /work/main && python bench/generate.py [--tokens 150] [--repeats 7] [--structured-repeats 3]
On a shared CPU single runs vary by ±15%: the medians of several interleaved runs are compared.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.protocols import ChatMessage, SamplingParams  # noqa: E402
from models.chat import ChatEngine  # noqa: E402
from models import constrained, structured  # noqa: E402
from models.structured import StructuredGenerator  # noqa: E402
from models.testing import TinyModelSpec, build_tiny_model, build_tokenizer  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402

BIG_VOCAB = 131072
# Big enough that a token costs what a small real model costs on a CPU (milliseconds, not microseconds).
BENCH_SPEC = TinyModelSpec(hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4, intermediate_size=1536,
                           context_length=4096, weight_scale=2.0)
PROMPT = [ChatMessage("system", "You are Engram, a helpful assistant."),
          ChatMessage("user", "Tell me about the city where I live and the coffee I like in the morning.")]
# What a turn's prompt carries besides the conversation: the recalled memories (about 700 tokens here).
CONTEXT = "Things you remember about the user: " + " ".join(
    f"The user likes {w} tea in the morning and lives in Paris near the {w} book shop." for w in
    ("red", "blue", "green", "small", "large", "happy", "sad") * 4)
FOLLOW_UP = "And which coffee did I say I like in the evening?"
SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "minItems": 8, "maxItems": 8, "items": {
        "type": "object",
        "properties": {"subject": {"type": "string", "minLength": 8, "maxLength": 12},
                       "predicate": {"type": "string", "enum": ["likes", "lives_in", "works_as"]},
                       "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["subject", "predicate", "confidence"], "additionalProperties": False}}},
    "required": ["facts"], "additionalProperties": False,
}


def decode_rate(stamps: list[float]) -> float:
    """Tokens per second between the first and the last token seen by the consumer (prompt excluded)."""
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def plain_run(engine: ChatEngine, prompt: list[int], tokens: int) -> float:
    import mlx.core as mx
    from mlx_lm import stream_generate

    def run(model, tokenizer):
        stamps = []
        for _ in stream_generate(model, tokenizer, mx.array(prompt), max_tokens=tokens):
            stamps.append(time.perf_counter())
        return stamps
    # Plain mlx-lm runs on the same MLX thread but is consumed right there, with no queue in between.
    return decode_rate(engine.run(run))


def engram_run(engine: ChatEngine, tokens: int) -> float:
    stamps = []
    for _ in engine.stream(PROMPT, SamplingParams.greedy(tokens)):
        stamps.append(time.perf_counter())
    return decode_rate(stamps)


def streaming_bench(engine: ChatEngine, tokens: int, repeats: int) -> dict:
    prompt = engine.render(PROMPT)
    plain_run(engine, prompt, 16)  # warm-up
    engram_run(engine, 16)
    plain, engram = [], []
    for _ in range(repeats):  # interleaved so both see the same machine load
        plain.append(plain_run(engine, prompt, tokens))
        engram.append(engram_run(engine, tokens))
    plain_tps, engram_tps = statistics.median(plain), statistics.median(engram)
    return {"tokens": tokens, "repeats": repeats, "plain_mlx_lm_runs": [round(x, 2) for x in plain],
            "engram_runs": [round(x, 2) for x in engram], "plain_mlx_lm_tokens_per_s": round(plain_tps, 2),
            "engram_tokens_per_s": round(engram_tps, 2), "ratio": round(engram_tps / plain_tps, 4),
            "target_ratio": 0.97, "meets_target": engram_tps / plain_tps >= 0.97}


def first_token_seconds(stream) -> float:
    """Seconds to the stream's first chunk; the rest is drained, so the MLX thread is free for the next call."""
    started = time.perf_counter()
    seconds = None
    for _ in stream:
        seconds = time.perf_counter() - started if seconds is None else seconds
    if seconds is None:
        raise RuntimeError("the stream produced no token")
    return seconds


def next_turn_bench(engine: ChatEngine, repeats: int, reply_tokens: int = 24) -> dict:
    """The first token of a conversation's second turn: Engram with the first turn in its prompt cache vs plain
    mlx-lm reading the whole prompt. Each repeat streams the first turn afresh, so the cache holds what it would."""
    import mlx.core as mx
    from mlx_lm import stream_generate
    first = [ChatMessage("system", CONTEXT), *PROMPT[1:]]
    engram, plain, reused, prompt_tokens = [], [], [], 0
    for _ in range(repeats):
        reply = "".join(c.text for c in engine.stream(first, SamplingParams.greedy(reply_tokens)))
        following = [*first, ChatMessage("assistant", reply), ChatMessage("user", FOLLOW_UP)]
        engram.append(first_token_seconds(engine.stream(following, SamplingParams.greedy(1))))
        reused.append(engine.last_reused_tokens)
        prompt = engine.render(following)
        prompt_tokens = len(prompt)
        plain.append(engine.run(lambda model, tokenizer, prompt=prompt: first_token_seconds(
            stream_generate(model, tokenizer, mx.array(prompt), max_tokens=1))))
        list(engine.stream(PROMPT, SamplingParams.greedy(1)))  # another conversation: the cache moves on
    return {"prompt_tokens": prompt_tokens, "reused_from_cache_tokens": statistics.median(reused),
            "engram_with_prompt_cache_ms": round(statistics.median(engram) * 1e3, 1),
            "plain_mlx_lm_ms": round(statistics.median(plain) * 1e3, 1), "repeats": repeats,
            "engram_runs_ms": [round(x * 1e3, 1) for x in engram], "plain_runs_ms": [round(x * 1e3, 1) for x in plain]}


class TimedGrammar(constrained.Grammar):
    """The real grammar of models.constrained, with the wall time of its work added up (the bench's own instrument);
    `calls` counts the tokens it produced, sampled or forced."""
    seconds = 0.0
    calls = 0

    def allows(self, token):
        return self._timed(super().allows, token)

    def mask(self, width):
        import mlx.core as mx
        started = time.perf_counter()
        row = super().mask(width)
        mx.eval(row)  # MLX is lazy: count the mask's making here, not in the next forward pass
        TimedGrammar.seconds += time.perf_counter() - started
        return row

    def consume(self, token):
        TimedGrammar.calls += 1
        return self._timed(super().consume, token)

    def forced(self):
        tokens = self._timed(super().forced)
        TimedGrammar.calls += len(tokens)
        return tokens

    @staticmethod
    def _timed(fn, *args):
        started = time.perf_counter()
        try:
            return fn(*args)
        finally:
            TimedGrammar.seconds += time.perf_counter() - started


@contextlib.contextmanager
def timed_processor():
    original = structured.Grammar
    structured.Grammar = TimedGrammar
    try:
        yield TimedGrammar
    finally:
        structured.Grammar = original


def structured_bench(engine: ChatEngine, repeats: int) -> dict:
    import mlx.core as mx
    from mlx_lm import stream_generate

    generator = StructuredGenerator(engine)
    generator.generate_json(PROMPT, SCHEMA, max_tokens=600)  # warm-up, builds the llguidance tokenizer
    prompt = engine.render(PROMPT)
    constrained, free = [], []
    produced = 0
    with timed_processor() as timer:
        for _ in range(repeats):
            start = time.perf_counter()
            value = generator.generate_json(PROMPT, SCHEMA, max_tokens=600)
            elapsed = time.perf_counter() - start
            produced = len(engine.tokenizer.encode(json.dumps(value, separators=(",", ":")),
                                                   add_special_tokens=False))
            constrained.append(elapsed / produced)
            # the same number of unconstrained tokens, prompt processing included in both
            start = time.perf_counter()
            engine.run(lambda model, tokenizer, produced=produced: list(
                stream_generate(model, tokenizer, mx.array(prompt), max_tokens=produced)))
            free.append((time.perf_counter() - start) / produced)
    constrained_ms, free_ms = statistics.median(constrained) * 1e3, statistics.median(free) * 1e3
    return {"vocab_size": BIG_VOCAB, "tokens_per_object": produced,
            "constrained_ms_per_token": round(constrained_ms, 3),
            "unconstrained_ms_per_token": round(free_ms, 3),
            "overhead_ms_per_token": round(constrained_ms - free_ms, 3),
            "grammar_processor_ms_per_token": round(timer.seconds / max(timer.calls, 1) * 1e3, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=7, help="streaming runs of each kind, interleaved")
    parser.add_argument("--structured-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    header = stamp("generate")
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        tokenizer_dir = Path(tmp) / "tokenizer"
        started = time.perf_counter()
        build_tokenizer(tokenizer_dir, BIG_VOCAB, extra_words=200_000)
        model_dir = build_tiny_model(Path(tmp) / "model", BENCH_SPEC, tokenizer_dir=tokenizer_dir)
        build_seconds = time.perf_counter() - started
        engine = ChatEngine.load(model_dir, context_tokens=4096)  # the prompt cache on, as the product runs
        try:
            result = {
                **header,
                "model": {"architecture": "qwen2", "bits": 4, "hidden": BENCH_SPEC.hidden_size,
                          "layers": BENCH_SPEC.num_layers, "vocab_size": len(engine.tokenizer.vocab),
                          "build_seconds": round(build_seconds, 1)},
                "streaming": streaming_bench(engine, args.tokens, args.repeats),
                "structured": structured_bench(engine, args.structured_repeats),
                "next_turn_first_token": next_turn_bench(engine, args.structured_repeats),
            }
        finally:
            engine.unload()
    result["load_average_1m_at_end"] = load_average()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
