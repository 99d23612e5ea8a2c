"""Where a turn's learning spends its time with a real model: `python -m bench.learning_profile --model FOLDER
[--first N] [--count K] [--top 25]`.

Says gold statements N..N+K-1 of bench/learning_gold.py (the ones before N are not said: the store starts empty)
through the real pipeline as bench/learning.py does (prepare, finish with a fixed reply, learn), under cProfile,
and prints JSON: per statement its seconds and every structured-model call (which prompt, prompt tokens, how many
came from the prompt cache, tokens generated, how many of them the grammar forced, seconds), then the functions
where the time went (cumulative), and the split: prefill and decode (waiting for MLX), the grammar's mask, the
rest. Heavy: run it under the model lock on a shared machine.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.learning import REPLY, SETTINGS, _Clock  # noqa: E402 (after the sys.path line: run as a script from anywhere)
from bench.learning_gold import GOLD  # noqa: E402 (after the sys.path line: run as a script from anywhere)
from bench.meta import stamp  # noqa: E402 (after the sys.path line: run as a script from anywhere)

# Where the time goes, by the function cProfile names (a substring of its "file:line(name)").
SPLIT = {
    "grammar mask": ("fill_next_token_bitmask", "compute_bitmask", "compute_ff_tokens", "consume_token",
                     "unpackbits", "try_consume_tokens"),
    "waiting for MLX (prefill and decode)": ("method 'item' of", "built-in method mlx.core.eval",
                                             "built-in method mlx.core.async_eval"),
}


def profiled_generator(engine: Any, mlx_profile: cProfile.Profile) -> Any:
    """A StructuredGenerator that records each call: the product's own class, measured around its methods; what runs
    on the engine's MLX thread is profiled there (cProfile sees only the thread that enabled it)."""
    from models.structured import StructuredGenerator

    class Recording(StructuredGenerator):
        calls: ClassVar[list[dict[str, Any]]] = []

        def generate_json(self, messages, schema, *, max_tokens=512, stop=None):
            started = time.perf_counter()
            try:
                return super().generate_json(messages, schema, max_tokens=max_tokens, stop=stop)
            finally:
                self.calls[-1].update(schema=schema.get("title", "?"), max_tokens=max_tokens,
                                      seconds=round(time.perf_counter() - started, 2))

        def _generate(self, model, tokenizer, grammar, prompt, max_tokens, weights, stop=None):
            mlx_profile.enable()
            try:
                tokens = super()._generate(model, tokenizer, grammar, prompt, max_tokens, weights, stop)
            finally:
                mlx_profile.disable()
            self.calls.append({"prompt_tokens": len(prompt), "from_cache": self.last_reused_tokens,
                               "generated": len(tokens), **_counts(self),
                               "text": tokenizer.decode(tokens)[:300]})
            return tokens

    return Recording(engine)


class Timers(dict):
    """Seconds by part of the grammar's work in each decoding step, added up over a run."""

    def add(self, part: str, seconds: float) -> None:
        self[part] = self.get(part, 0.0) + seconds


def timed_grammar(timers: Timers) -> type:
    """models.structured.GrammarProcessor with each part of a step timed: waiting for the token sampled last (the
    forward pass, MLX computes lazily), then masking what the grammar forbids."""
    import mlx.core as mx
    import numpy as np
    from llguidance.numpy import fill_next_token_bitmask

    from models import structured

    class TimedGrammar(structured.GrammarProcessor):
        def __call__(self, tokens: Any, logits: Any) -> Any:
            began = time.perf_counter()
            last = int(tokens[-1].item()) if self._started else None
            waited = time.perf_counter()
            timers.add("waiting for the forward pass", waited - began)
            if last is not None:
                self.matcher.consume_token(last)
            self._started = True
            fill_next_token_bitmask(self.matcher, self.bitmask)
            allowed = np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")[: logits.shape[-1]]
            masked = mx.where(mx.array(allowed.astype(np.bool_)), logits, -mx.inf)
            timers.add("grammar mask", time.perf_counter() - waited)
            timers.add("steps", 1)
            return masked

    return TimedGrammar


def timed_pieces(timers: Timers, pieces: Any) -> Any:
    """models.generation.stream_pieces with the time to its first token (reading the prompt) and after it."""
    def stream(*args: Any, **kwargs: Any) -> Any:
        began, first = time.perf_counter(), None
        try:
            for piece in pieces(*args, **kwargs):
                if first is None:
                    first = time.perf_counter()
                    timers.add("prompt read, to the first token", first - began)
                yield piece
        finally:
            if first is not None:
                timers.add("after the first token", time.perf_counter() - first)
    return stream


def _counts(generator: Any) -> dict[str, int]:
    counts = getattr(generator, "last_counts", None)  # the constrained loop's (models.constrained)
    return {} if counts is None else {"sampled": counts.sampled, "forced": counts.forced,
                                      "drafted": getattr(counts, "drafted", 0), "masks": counts.masks,
                                      "forward_passes": counts.passes}


def timed_constrained(timers: Timers) -> None:
    """models.constrained with the grammar's work and the prompt's reading timed (the rest of a generation is the
    forward passes and the sampling)."""
    from models import constrained, structured

    class TimedGrammar(constrained.Grammar):
        def allows(self, token: int) -> bool:
            return _timed(timers, "grammar: check the model's choice", super().allows, token)

        def mask(self, width: int) -> Any:
            import mlx.core as mx
            return _timed(timers, "grammar mask", lambda: mx.eval(row := super(TimedGrammar, self).mask(width))
                          or row)

        def consume(self, token: int) -> bool:
            return _timed(timers, "grammar: consume and forced tokens", super().consume, token)

        def forced(self) -> list[int]:
            return _timed(timers, "grammar: consume and forced tokens", super().forced)

    reader = constrained.read_prompt

    def read_prompt(*args: Any, **kwargs: Any) -> Any:
        return _timed(timers, "prompt read", reader, *args, **kwargs)

    structured.Grammar, constrained.read_prompt = TimedGrammar, read_prompt


def _timed(timers: Timers, part: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    began = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        timers.add(part, time.perf_counter() - began)


def compare_decoding(engine: Any, text: str, tokens: int) -> dict[str, Any]:
    """The first `tokens` tokens of this statement's extraction, from a fresh cache: token by token with the whole
    mask at every step (the loop before 2026-11-28, as in tests/integration/test_constrained.py) against the
    product's constrained loop; wall and process CPU seconds, forward passes. Same prompt, same run."""
    import mlx.core as mx
    import numpy as np
    from llguidance import LLMatcher
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
    from mlx_lm.models.cache import make_prompt_cache

    from core.prompts.engram import engram_messages, facts_max_tokens, facts_schema
    from models.constrained import DecodeCounts, Grammar, constrained_tokens
    from models.generation import generate_tokens
    from models.structured import StructuredGenerator

    generator = StructuredGenerator(engine, use_prompt_cache=False)
    limit = SETTINGS.generation.engram_max_facts
    grammar = generator.compile(facts_schema(limit))
    prompt = engine.prompt_tokens(engram_messages(text, REPLY, "2026-06-01"), reserve=facts_max_tokens(limit) // 4)
    vocab = generator._tokenizer()

    def before(model: Any, tokenizer: Any) -> list[int]:
        matcher, started = LLMatcher(vocab, grammar, log_level=0), []
        bitmask = allocate_token_bitmask(1, vocab.vocab_size)

        def mask(seen: Any, logits: Any) -> Any:
            if started:
                matcher.consume_token(int(seen[-1].item()))
            started.append(1)
            fill_next_token_bitmask(matcher, bitmask)
            allowed = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[: logits.shape[-1]]
            return mx.where(mx.array(allowed.astype(np.bool_)), logits, -mx.inf)
        return list(generate_tokens(model, mx.array(prompt), cache=make_prompt_cache(model),
                                    stream=engine.generation_stream, max_tokens=tokens, logits_processors=[mask]))

    counts = DecodeCounts()

    def after(model: Any, tokenizer: Any) -> list[int]:
        grammar_now = Grammar(LLMatcher(vocab, grammar, log_level=0), vocab.vocab_size)
        return list(constrained_tokens(model, mx.array(prompt), grammar_now, cache=make_prompt_cache(model),
                                       stream=engine.generation_stream, max_tokens=tokens,
                                       eos=set(tokenizer.eos_token_ids), counts=counts, history=prompt))

    def prompt_only(model: Any, tokenizer: Any) -> None:
        from models.generation import read_prompt
        with mx.stream(engine.generation_stream):
            read_prompt(model, mx.array(prompt), make_prompt_cache(model))

    out: dict[str, Any] = {"prompt_tokens": len(prompt), "tokens": tokens}
    for name, fn in (("prompt read alone", prompt_only), ("token by token, whole mask each step", before),
                     ("constrained loop", after)):
        wall, cpu = time.perf_counter(), time.process_time()
        made = engine.run(fn)
        out[name] = {"seconds": round(time.perf_counter() - wall, 1),
                     "cpu_seconds": round(time.process_time() - cpu, 1)}
        if made is not None:
            out[name]["text"] = engine.tokenizer.decode(made)
    out["constrained loop"].update(dataclasses.asdict(counts))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an MLX model folder")
    parser.add_argument("--first", type=int, default=1, help="index of the first gold statement said (0-based)")
    parser.add_argument("--count", type=int, default=2, help="how many statements, in order")
    parser.add_argument("--top", type=int, default=25, help="functions listed by cumulative time")
    parser.add_argument("--compare", type=int, default=0,
                        help="first decode this many tokens of the first statement's extraction both ways")
    args = parser.parse_args(argv)
    header = stamp("learning_profile")
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()
    from core.assistant import Assistant
    from core.store.db import open_db
    from core.store.sessions import create_session
    from models.chat import ChatEngine
    from models.embeddings import load_embedder

    embedder = load_embedder(SETTINGS.embedder)
    started = time.perf_counter()
    engine = ChatEngine.load(Path(args.model).expanduser(), context_tokens=SETTINGS.generation.context_tokens)
    load_seconds = time.perf_counter() - started
    compared = compare_decoding(engine, GOLD[args.first].text, args.compare) if args.compare else None
    if compared:
        print(json.dumps(compared, ensure_ascii=False), file=sys.stderr, flush=True)
    profile, mlx_profile, per_statement, clock = cProfile.Profile(), cProfile.Profile(), [], _Clock()
    from models import structured as structured_module
    timers = Timers()
    if hasattr(structured_module, "GrammarProcessor"):  # the token-by-token loop (before 2026-11-28): its steps
        structured_module.GrammarProcessor = timed_grammar(timers)
        structured_module.stream_pieces = timed_pieces(timers, structured_module.stream_pieces)
    else:
        timed_constrained(timers)
    structured = profiled_generator(engine, mlx_profile)
    statements = GOLD[args.first: args.first + args.count]
    with tempfile.TemporaryDirectory(prefix="engram-profile-") as folder:
        db = open_db(Path(folder) / "engram.db", clock=clock)
        assistant = Assistant(db, embedder, engine, structured, SETTINGS, clock)
        session = create_session(db, title="profile")
        for statement in statements:
            clock.now += 600.0
            first_call = len(structured.calls)
            began = time.perf_counter()
            profile.enable()
            report = assistant.learn(assistant.finish(assistant.prepare(session, statement.text), REPLY))
            profile.disable()
            per_statement.append({"text": statement.text, "seconds": round(time.perf_counter() - began, 2),
                                  "kept": [[f.subject, f.relation, f.object] for f in report.facts],
                                  "dropped": [[str(i.get("subject")), str(i.get("relation")), str(i.get("object")), why]
                                              for i, why in report.dropped],
                                  "calls": structured.calls[first_call:]})
            print(json.dumps(per_statement[-1], ensure_ascii=False), file=sys.stderr, flush=True)
        db.close()
    engine.unload()
    main_stats, mlx_stats = pstats.Stats(profile), pstats.Stats(mlx_profile)
    result = {**header, "model": Path(args.model).name, "load_seconds": round(load_seconds, 1),
              "decoding_compared": compared, "statements": per_statement, "model_calls_split": split(mlx_stats),
              "grammar_steps": {k: round(v, 2) for k, v in timers.items()},
              "seconds_learning": round(sum(s["seconds"] for s in per_statement), 2),
              "top_in_model_calls": top(mlx_stats, args.top), "top_elsewhere": top(main_stats, args.top // 2)}
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def split(stats: pstats.Stats) -> dict[str, float]:
    """Seconds in each part of SPLIT (own time of the matching functions), and the total."""
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    parts = {name: 0.0 for name in SPLIT}
    for func, row in stats.stats.items():  # type: ignore[attr-defined]
        label = pstats.func_std_string(func)
        for name, needles in SPLIT.items():
            if any(n in label for n in needles):
                parts[name] += row[2]
                break
    parts["the rest (Python, SQLite, embedding)"] = total - sum(parts.values())
    return {**{k: round(v, 2) for k, v in parts.items()}, "total": round(total, 2)}


def top(stats: pstats.Stats, count: int) -> list[str]:
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(count)
    return [line for line in out.getvalue().splitlines() if line.strip()][-count:]


if __name__ == "__main__":
    raise SystemExit(main())
