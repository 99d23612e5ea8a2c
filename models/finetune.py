"""Overnight fine-tuning as a scheduler job: build the training set, train a LoRA adapter in a separate
process, score it against the active one, and activate it only if the gate says it is better.

The job's checkpoint holds the run folder and phase, and the worker keeps its own checkpoint (weights,
optimizer state, step), so a fine-tune that yields to the user or dies with the app resumes where it was.
A run that fails (diverged loss, killed worker) changes nothing in the store: an adapter row is written
only once a trained adapter has been scored.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from core.errors import ModelError
from core.finetune import adapters as versions
from core.finetune.dataset import TrainingSet, build_training_set
from core.finetune.recipe import MIN_EXAMPLES, cooler_rate, readiness, recipe_for
from core.finetune.gate import GENERAL_TEXT, KNOWN_FACTS, GateSettings, Scores, decide
from core.scheduler import YIELDED, JobContext
from core.store.db import Database
from models.early_stop import first_reading_broke_margins, kept_scores, start_again
from models.parent_guard import child_env

REPO_ROOT = Path(__file__).resolve().parents[1]
EXIT_CANCELLED = 3


@dataclass(frozen=True)
class TrainConfig:
    """An explicit recipe (benches and tests); the product's FineTuner leaves it None and takes
    core.finetune.recipe's, chosen from the number of examples."""

    epochs: int = 2  # passes over the (small) training set
    max_iters: int = 1000
    batch_size: int = 4
    learning_rate: float = 1e-4
    rank: int = 8
    scale: float = 20.0
    num_layers: int = 16
    max_seq_length: int = 1024
    steps_per_report: int = 10
    save_every: int = 20
    seed: int = 0
    min_examples: int = MIN_EXAMPLES
    objective: str = "sft"  # or "orpo" (models/preference_pairs.py) when the set has preference pairs
    steps: int = 0  # the recipe's step count (0: from epochs)
    eval_every: int = 0  # early stopping on the gate's measures every this many steps (0: none)

    def iters_for(self, examples: int) -> int:
        if self.steps:
            return self.steps
        per_epoch = max(1, math.ceil(examples / max(1, min(self.batch_size, examples))))
        return max(1, min(self.max_iters, self.epochs * per_epoch))


@dataclass
class WorkerResult:
    exit_code: int
    events: list[dict] = field(default_factory=list)
    stopped: bool = False

    def last(self, event: str) -> Optional[dict]:
        return next((e for e in reversed(self.events) if e.get("event") == event), None)

    def error(self) -> str:
        err = self.last("error")
        if err:
            return err["message"]
        if self.exit_code < 0:
            return f"the training process was killed by signal {-self.exit_code}"
        return f"the training process exited with code {self.exit_code}"


def run_worker(mode: str, config: dict, folder: Path, *, on_event: Callable[[dict], None] = lambda e: None,
               should_stop: Callable[[], bool] = lambda: False, poll_seconds: float = 0.2,
               python: str = sys.executable) -> WorkerResult:
    """Run models.train_worker in its own process, forwarding its JSON events; SIGTERM it when asked to stop."""
    _private_folder(folder)
    config_path = folder / f"{mode}.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    log = (folder / f"{mode}.log").open("ab")
    for made in (config_path, folder / f"{mode}.log"):
        os.chmod(made, 0o600)
    proc = subprocess.Popen([python, "-m", "models.train_worker", mode, str(config_path)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=log, text=True, env=child_env())
    lines: "queue.Queue[Optional[str]]" = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
    result = WorkerResult(exit_code=0)
    try:
        while True:
            try:
                line = lines.get(timeout=poll_seconds)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                event = json.loads(line)
                result.events.append(event)
                on_event(event)
            if not result.stopped and should_stop():
                result.stopped = True
                proc.send_signal(signal.SIGTERM)  # the worker checkpoints before its next step and exits
        result.exit_code = proc.wait()
        if result.stopped and result.exit_code == -signal.SIGTERM:
            result.exit_code = EXIT_CANCELLED  # stopped before it could set up its handler: nothing to lose
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    return result


def _pump(stream: Any, lines: "queue.Queue[Optional[str]]") -> None:
    for line in stream:
        if line.strip():
            lines.put(line)
    lines.put(None)


@dataclass
class FineTuner:
    """The fine-tune job handler, bound to one store, one base model and a folder for adapters."""

    db: Database
    model_path: str
    adapters_root: Path
    config: Optional[TrainConfig] = None  # None: core.finetune.recipe's, chosen from the training set's size
    gate: GateSettings = GateSettings()
    on_activated: Callable[[Optional[versions.Adapter]], None] = lambda adapter: None
    python: str = sys.executable
    # Before each worker process loads its copy of the model: unload the app's chat model if both would not fit,
    # or raise a ModelError if the training alone would not (app.services.scheduling.make_room_for_training).
    make_room: Callable[[], object] = lambda: None  # its verdict, if any, is not read here

    def __call__(self, ctx: JobContext) -> Optional[str]:
        state = dict(ctx.resume or {})
        if "run_dir" not in state:
            prepared = self._prepare(ctx)
            if prepared is None:
                return None
            state = prepared
        run_dir = Path(state["run_dir"])
        if state["phase"] == "train":
            # Always resume: the worker continues from its last checkpoint when there is one, which after a crash
            # or quit mid-training (no clean yield recorded) is its periodic save.
            while True:
                if self._train(ctx, run_dir, state) == YIELDED:
                    return self._yielded(ctx, run_dir, state)
                cooler = self._start_again_cooler(ctx, run_dir, state)
                if cooler is None:
                    break
                state = cooler
                ctx.checkpoint(state)
            state = {**state, "phase": "evaluate"}
            ctx.checkpoint(state)
        if self._evaluate_and_record(ctx, run_dir, state) == YIELDED:
            return self._yielded(ctx, run_dir, state)  # scoring starts again next time: it keeps no partial state
        return None

    def _yielded(self, ctx: JobContext, run_dir: Path, state: dict) -> str:
        if ctx.yield_reason == "cancel":
            ctx.checkpoint({})  # cancelled for good: nothing of the run is kept
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            ctx.checkpoint(state)
        return YIELDED

    def _prepare(self, ctx: JobContext) -> Optional[dict]:
        training = build_training_set(self.db)
        reason = readiness(training.size, len(training.probes))
        if self.config is not None and not reason and training.size < self.config.min_examples:
            reason = f"not enough to learn yet: {training.size} examples (at least {self.config.min_examples})"
        if reason:
            ctx.progress(1.0, "no fine-tune: " + reason)
            return None
        config = self.config or config_from_recipe(training)
        run_dir = self.adapters_root / f"run-{int(self.db.now())}-{ctx.job.id}"
        _private_folder(self.adapters_root)
        _private_folder(run_dir)
        _write_run(run_dir, training)
        state = {"run_dir": str(run_dir), "phase": "train", "iters": config.iters_for(training.size),
                 "config": asdict(config), "examples": training.size, "pairs": len(training.pairs)}
        ctx.checkpoint(state)
        return state

    def _train(self, ctx: JobContext, run_dir: Path, state: dict) -> Optional[str]:
        if ctx.should_yield():
            return YIELDED
        self.make_room()
        cfg = state["config"]
        iters = state["iters"]
        # Always resume: the worker continues from its last checkpoint when there is one, which after a crash
        # or quit mid-training (no clean yield recorded) is its periodic save.
        worker_config = {**{k: cfg[k] for k in ("batch_size", "learning_rate", "rank", "scale", "num_layers",
                                                 "max_seq_length", "steps_per_report", "save_every", "seed",
                                                 "objective")},
                         "model": self.model_path, "data_dir": str(run_dir / "data"),
                         "adapter_dir": str(run_dir / "adapter"), "iters": iters, "resume": True,
                         "early_stop": self._early_stop(run_dir, cfg)}
        result = run_worker("train", worker_config, run_dir, on_event=lambda e: _report_training(ctx, e, iters),
                            should_stop=ctx.should_yield, python=self.python)
        if result.exit_code == EXIT_CANCELLED:
            return YIELDED
        if result.exit_code != 0:
            ctx.checkpoint({})  # the next attempt starts a fresh run; nothing of this one is kept
            shutil.rmtree(run_dir, ignore_errors=True)
            raise ModelError(f"fine-tuning failed: {result.error()}; the active adapter is unchanged")
        return None

    def _start_again_cooler(self, ctx: JobContext, run_dir: Path, state: dict) -> Optional[dict]:
        """When the run's first reading was already outside the gate's margins (core.finetune.recipe: too hot for
        this model), empty its adapter folder and return its state at a lower learning rate; else None."""
        broke = first_reading_broke_margins(run_dir / "adapter")
        rate = state["config"]["learning_rate"]
        cooler = cooler_rate(rate, len(state.get("too_hot", []))) if broke else None
        if broke is None or cooler is None:
            return None
        start_again(run_dir / "adapter")
        ctx.progress(0.0, f"the first {broke['step']} steps at learning rate {rate:.2g} pushed plain text or known "
                          f"facts past the gate's margins: starting again at {cooler:.2g}")
        tried = [*state.get("too_hot", []), {"learning_rate": rate, "step": broke["step"],
                                             "general_ppl": broke["general_ppl"],
                                             "known_fact_loss": broke["known_fact_loss"]}]
        return {**state, "config": {**state["config"], "learning_rate": cooler}, "too_hot": tried}

    def _evaluate_and_record(self, ctx: JobContext, run_dir: Path, state: dict) -> Optional[str]:
        ctx.progress(0.92, "scoring the new adapter against the active one")
        active = versions.active_adapter(self.db)
        if active is not None and active.base_model != self.model_path:
            active = None  # an adapter of another base model cannot be the baseline: compare with the base
        probes = json.loads((run_dir / "probes.json").read_text(encoding="utf-8"))
        candidate_path = str(run_dir / "adapter")
        if ctx.should_yield():
            return YIELDED
        evaluation = {"probes": probes, "general": list(GENERAL_TEXT),
                      "known_facts": [{"question": q, "answer": a} for q, a in KNOWN_FACTS]}
        key = baseline_key(self.model_path, active.path if active else None, evaluation)
        reused = scored_baseline(self.db, key)  # the same weights on the same sets: scored by an earlier run
        # The early stop scored the base before the first step and the kept weights as it kept them, on these sets.
        trained_base, kept = kept_scores(run_dir / "adapter")
        known = reused or (trained_base if active is None else None)
        measured: list[dict] = []
        if known is None or kept is None:
            self.make_room()
            result = run_worker("evaluate", {"model": self.model_path, **evaluation,
                                             "adapters": ([] if known else [active.path if active else None])
                                             + ([] if kept else [candidate_path])},
                                run_dir, should_stop=ctx.should_yield, python=self.python)
            if result.exit_code == EXIT_CANCELLED:
                return YIELDED  # the user came back while it scored (a minute or more on a large model)
            scores = result.last("scores")
            if result.exit_code != 0 or scores is None:
                raise ModelError(f"evaluating the new adapter failed: {result.error()}")
            measured = scores["results"]
        results = ([known] if known else []) + measured + ([kept] if kept else [])
        baseline, candidate = (Scores(r["probe_loss"], r["general_ppl"], r.get("known_fact_loss")) for r in results)
        decision = decide(baseline, candidate, self.gate)
        sources = json.loads((run_dir / "sources.json").read_text(encoding="utf-8"))
        with self.db.transaction():  # a Forget everything lands wholly before this (cancelled) or after (switched off)
            if ctx.should_yield() and ctx.yield_reason == "cancel":
                return YIELDED  # cancelled as the scores came back: what it learned from is gone, so is it
            adapter = versions.record_adapter(
                self.db, name=f"adapter {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.db.now()))}",
                base_model=self.model_path, path=candidate_path, status="accepted" if decision.accept else "rejected",
                metrics={"baseline": asdict(baseline), "candidate": asdict(candidate), "gate": decision.as_dict(),
                         "probe_loss_by_kind": {"baseline": results[0].get("probe_loss_by_kind"),
                                                "candidate": results[1].get("probe_loss_by_kind")},
                         "baseline_adapter": active.id if active else None, "baseline_key": key,
                         "baseline_reused": reused is not None, "scored_while_training": kept is not None,
                         "iters": state["iters"], "too_hot": state.get("too_hot", []),
                         "examples": state.get("examples"), "pairs": state.get("pairs"),
                         "preference_margin": {"baseline": results[0].get("preference_margin"),
                                               "candidate": results[1].get("preference_margin")}},
                config=state["config"], sources=sources, parent_id=active.id if active else None)
            switched_on = versions.activate(self.db, adapter.id) if decision.accept else None
        _drop_training_text(run_dir)
        if switched_on is not None:
            self.on_activated(switched_on)
        ctx.progress(1.0, ("activated: " if decision.accept else "kept the active one: ") + "; ".join(decision.reasons))
        return None


    def _early_stop(self, run_dir: Path, cfg: dict) -> Optional[dict]:
        if not cfg.get("eval_every"):
            return None
        probes = json.loads((run_dir / "probes.json").read_text(encoding="utf-8"))
        return {"every": cfg["eval_every"], "probes": probes, "general": list(GENERAL_TEXT),
                "known_facts": [{"question": q, "answer": a} for q, a in KNOWN_FACTS], **asdict(self.gate)}


def config_from_recipe(training: TrainingSet) -> TrainConfig:
    """The worker's settings from core.finetune.recipe for this training set."""
    recipe = recipe_for(training.size, len(training.pairs))
    return TrainConfig(steps=recipe.steps, batch_size=recipe.batch_size,
                       learning_rate=recipe.learning_rate, rank=recipe.rank, scale=recipe.scale,
                       num_layers=recipe.num_layers, max_seq_length=512, steps_per_report=1,
                       save_every=max(1, recipe.steps // 4), objective=recipe.objective,
                       eval_every=recipe.eval_every)


def _report_training(ctx: JobContext, event: dict, iters: int) -> None:
    """The job's progress line (the Jobs panel's loss curve and `engram finetune now` read it)."""
    if event["event"] == "step":
        loss = event.get("loss")
        tps = event.get("tokens_per_second")
        ctx.progress(0.9 * event["step"] / event["iters"],
                     f"step {event['step']}/{event['iters']}" + (f", loss {loss:.3f}" if loss is not None else "")
                     + (f", {tps:.0f} tok/s" if tps else "") + f", ETA {event['eta_seconds']:.0f}s")
    elif event["event"] == "evaluated" and event["step"]:
        scores = event["scores"]
        ctx.progress(0.9 * min(1.0, event["step"] / iters), f"step {event['step']}/{iters} checked: held-out probes "
                     f"{scores['probe_loss']:.3f}, plain-text ppl {scores['general_ppl']:.1f} ({event['verdict']})")


def baseline_key(model_path: str, baseline_adapter: Optional[str], evaluation: dict) -> str:
    """What the baseline's scores depend on: the base weights (each file's size and time), the baseline adapter's
    weights, and the evaluation sets. A nightly run whose probes have not changed need not score them again."""
    files = [p for folder in (Path(model_path), Path(baseline_adapter) if baseline_adapter else None)
             if folder is not None and folder.is_dir() for p in sorted(folder.glob("*.safetensors"))]
    stamp = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    text = json.dumps({"model": model_path, "adapter": baseline_adapter, "weights": stamp, **evaluation},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scored_baseline(db: Database, key: str) -> Optional[dict]:
    """The baseline scores an earlier run measured under the same key (only a hash of the sets is kept)."""
    for adapter in versions.list_adapters(db):
        metrics = adapter.metrics
        if metrics.get("baseline_key") == key and isinstance(metrics.get("baseline"), dict):
            return {**metrics["baseline"], "probe_loss_by_kind": (metrics.get("probe_loss_by_kind") or {}).get(
                "baseline")}
    return None


def _private_folder(folder: Path) -> None:
    """Adapters and their training data are learnt from the user's memories: readable by the user alone."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)


def _write_run(run_dir: Path, training: TrainingSet) -> None:
    data = run_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    with (data / "train.jsonl").open("w", encoding="utf-8") as fh:
        for example in training.examples:
            fh.write(json.dumps(example) + "\n")
    with (data / "pairs.jsonl").open("w", encoding="utf-8") as fh:
        for pair in training.pairs:
            fh.write(json.dumps(pair) + "\n")
    (run_dir / "probes.json").write_text(json.dumps([{"question": p.question, "answer": p.answer, "kind": p.kind,
                                                      "rejected": p.rejected} for p in training.probes]),
                                         encoding="utf-8")
    (run_dir / "sources.json").write_text(json.dumps({"memory": training.memory_ids, "episode": training.episode_ids,
                                                      "hypothesis": training.hypothesis_ids}), encoding="utf-8")
    for made in (data, data / "train.jsonl", data / "pairs.jsonl", run_dir / "probes.json", run_dir / "sources.json"):
        os.chmod(made, 0o700 if made.is_dir() else 0o600)


def _drop_training_text(run_dir: Path) -> None:
    """Once scored, the run's copies of the user's words go: lineage keeps ids, the store keeps the text,
    and a memory purged later must not survive in a stray training file."""
    shutil.rmtree(run_dir / "data", ignore_errors=True)
    for name in ("probes.json", "sources.json", "evaluate.json", "train.json"):
        (run_dir / name).unlink(missing_ok=True)
