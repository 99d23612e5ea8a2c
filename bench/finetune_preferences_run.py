"""bench/finetune_preferences.py's run, in resumable chunks: no run has to hold the model for its whole length.

A run's folder (--resume DIR) keeps what is done: state.json (the model, the training set's fingerprint, the
adapter's gate figures, the plain-SFT comparison, every reply so far by question and condition) and the trained
adapters. Each step is saved as soon as it ends: the adapter after training, the SFT comparison after its training,
then the replies of every QUESTIONS_PER_CHUNK questions (all four conditions of the same questions, so a run stopped
anywhere compares the conditions on the same questions). A run started again on the same folder trains nothing it
has and answers only what is missing; --minutes stops it before a chunk that would not fit (training is not split:
on SmolLM2 it takes minutes, counted in the first chunk). The questions are interleaved over the sets (PrefEval,
BEAM, styles), so a partial run covers all three.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from bench import finetune_preferences as prefs
from core.finetune import adapters as versions
from core.finetune.dataset import build_training_set

QUESTIONS_PER_CHUNK = 4  # x 2 conditions = 8 prompts per model per batch; one chunk is a minute or two on SmolLM2
CONDITIONS = ("no_memory", "memory", "adapter", "adapter_memory")


def case_key(case: dict) -> str:
    """A question's identity across runs: its set and its words (not its position, which a new --limit moves)."""
    text = json.dumps([case["set"], case["preference"], case["question"]], ensure_ascii=False)
    return f"{case['set']}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


def interleave(*lists: list[dict]) -> list[dict]:
    """Round-robin over the sets: the first questions answered span every set."""
    out = []
    for n in range(max((len(x) for x in lists), default=0)):
        out += [x[n] for x in lists if n < len(x)]
    return out


def fingerprint(training: Any) -> str:
    """What the adapter depends on: the examples, pairs and probes it was trained and judged on, by their words
    (not the store's row ids, which move with the questions asked beside them)."""
    probes = [[p.question, p.answer, p.kind, p.rejected] for p in training.probes]
    text = json.dumps([training.examples, training.pairs, probes], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class State:
    """The run folder's state.json, written whole to a temporary file and renamed: a kill never leaves half."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "state.json"
        self.data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8")) if self.path.is_file() else {}
        self.data.setdefault("replies", {})

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_suffix(".tmp")
        staging.write_text(json.dumps(self.data, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(staging, self.path)

    def claim(self, label: str, print_: str) -> None:
        """The folder belongs to one model and one training set: another one is refused before anything runs."""
        for key, value in (("model", label), ("fingerprint", print_)):
            if self.data.get(key, value) != value:
                raise SystemExit(f"engram bench: {self.folder} holds a run with another {key} "
                                 f"({self.data[key]}); use another --resume folder")
            self.data[key] = value


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def adapter_figures(adapter: versions.Adapter, seconds: float) -> dict:
    m = adapter.metrics
    return {"status": adapter.status, "gate": m["gate"]["reasons"], "config": dict(adapter.config),
            "steps": m["iters"], "train_and_score_seconds": round(seconds, 1), "path": adapter.path,
            "general_ppl": {"base": m["baseline"]["general_ppl"], "adapter": m["candidate"]["general_ppl"]},
            "known_fact_loss": {"base": m["baseline"]["known_fact_loss"],
                                "adapter": m["candidate"]["known_fact_loss"]},
            "probe_loss": {"base": m["baseline"]["probe_loss"], "adapter": m["candidate"]["probe_loss"]},
            "preference_margin": m.get("preference_margin"),
            "too_hot": m.get("too_hot", [])}  # the learning rates whose first reading broke the gate's margins


def train(db: Any, model_dir: str, folder: Path, config: Any = None) -> dict:
    """Engram's own nightly path (config None: the recipe from the data's size), judged against the base model;
    the adapter is kept and scored whether the gate took it or not."""
    from bench.finetune import gate_run
    versions.rollback_to_base(db)
    started = time.perf_counter()
    adapter = gate_run(db, model_dir, folder, config)
    figures = adapter_figures(adapter, time.perf_counter() - started)
    log(f"{config.objective if config else 'recipe'} adapter {adapter.status} after "
        f"{figures['train_and_score_seconds']} s: " + "; ".join(figures["gate"]))
    return figures


def sft_figures(trained: dict) -> dict:
    """The plain-loss adapter on the gate's measures (its margin is the preferred-over-ignoring log-prob gap)."""
    return {k: trained[k] for k in ("status", "steps", "probe_loss", "preference_margin", "general_ppl",
                                    "known_fact_loss", "train_and_score_seconds")}


class Answerer:
    """The base model and base + adapter, loaded once per run: greedy replies to a chunk's prompts in one batch."""

    def __init__(self, model_dir: str, adapter_path: str) -> None:
        from mlx_lm.tuner.utils import load_adapters

        from models.train_worker import _load
        self.base, self.tokenizer = _load({"model": model_dir})
        self.tuned, _ = _load({"model": model_dir})
        load_adapters(self.tuned, adapter_path)
        self.base.eval()
        self.tuned.eval()
        self.tail = prefs.filler()

    def replies(self, cases: list[dict]) -> dict[str, list[str]]:
        from mlx_lm import batch_generate
        prompts = [list(self.tokenizer.apply_chat_template(prefs.prompt(case, memory, self.tail),
                                                           add_generation_prompt=True))
                   for case in cases for memory in (False, True)]
        out: dict[str, list[str]] = {}
        for model, names in ((self.base, ("no_memory", "memory")), (self.tuned, ("adapter", "adapter_memory"))):
            texts = batch_generate(model, self.tokenizer, prompts, max_tokens=prefs.MAX_TOKENS).texts
            for n, name in enumerate(names):
                out[name] = list(texts[n::2])
        return out


def answer_missing(state: State, cases: list[dict], answerer: Callable[[], Any], deadline: float | None,
                   on_saved: Callable[[], None], clock: Callable[[], float] = time.monotonic) -> bool:
    """Answer the questions without all four replies, a chunk at a time, saving after each; False when the
    deadline (on `clock`) stopped it first: a chunk is not started when one as long as the last would end after it.
    `answerer` builds what answers (an Answerer: its models load only if there is something to answer)."""
    replies = state.data["replies"]
    todo = [c for c in cases if set(replies.get(case_key(c), {})) != set(CONDITIONS)]
    model = None
    last_chunk = 0.0
    for start in range(0, len(todo), QUESTIONS_PER_CHUNK):
        if deadline is not None and clock() + last_chunk > deadline:
            log(f"stopped for --minutes: {len(cases) - len(todo) + start}/{len(cases)} questions answered; "
                "run again with the same --resume folder to carry on")
            return False
        chunk = todo[start:start + QUESTIONS_PER_CHUNK]
        began = clock()
        model = model or answerer()
        out = model.replies(chunk)
        for i, case in enumerate(chunk):
            replies[case_key(case)] = {name: out[name][i] for name in CONDITIONS}
        last_chunk = clock() - began
        state.data["generation_seconds"] = round(state.data.get("generation_seconds", 0.0) + last_chunk, 1)
        state.save()
        on_saved()
        log(f"{len(cases) - len(todo) + start + len(chunk)}/{len(cases)} questions, 4 conditions each "
            f"({last_chunk:.0f} s this chunk of {len(chunk)})")
    return True


def result(state: State, cases: list[dict], label: str, training: Any) -> dict:
    """The run's figures so far: scores over the questions with all four replies."""
    replies = state.data["replies"]
    done = [c for c in cases if set(replies.get(case_key(c), {})) == set(CONDITIONS)]
    by_condition = {name: [replies[case_key(c)][name] for c in done] for name in CONDITIONS}
    out = {"model": label, "cases": len(cases), "questions_answered": len(done), "complete": len(done) == len(cases),
           "training_examples": training.size, "preference_pairs": len(training.pairs),
           "styles_learned": training.styles, "training_fingerprint": state.data.get("fingerprint"),
           "preferences_without_demonstration": len(cases) - len(training.episode_ids)}
    for key in ("adapter", "plain_sft_same_recipe", "generation_seconds"):
        if key in state.data:
            out[key] = state.data[key]
    out["scores"] = prefs.summarise(done, by_condition)
    out["examples"] = [{"case": c, **{k: v[i][:300] for k, v in by_condition.items()}}
                       for i, c in enumerate(done) if c["set"] == "styles"][:4]
    return out


def run(model_dir: str, label: str, cases: list[dict], folder: Path, *, sft: bool = True,
        minutes: float | None = None, on_result: Callable[[dict], None] = lambda r: None) -> dict:
    """Train what the folder lacks, answer what it lacks within `minutes`, and hand each saved result to
    `on_result` (the bench writes its JSON file there, so a stopped run leaves its figures so far)."""
    deadline = time.monotonic() + 60 * minutes if minutes else None
    state = State(folder)
    db = prefs.user_store(cases)
    training = build_training_set(db)
    state.claim(label, fingerprint(training))
    state.save()
    if "adapter" not in state.data:
        state.data["adapter"] = train(db, model_dir, folder / "adapters")
        state.save()
    if sft and "plain_sft_same_recipe" not in state.data:
        from models.finetune import config_from_recipe
        state.data["plain_sft_same_recipe"] = sft_figures(
            train(db, model_dir, folder / "sft", replace(config_from_recipe(training), objective="sft")))
        state.save()
    on_result(result(state, cases, label, training))
    answer_missing(state, cases, lambda: Answerer(model_dir, state.data["adapter"]["path"]), deadline,
                   lambda: on_result(result(state, cases, label, training)))
    return result(state, cases, label, training)
