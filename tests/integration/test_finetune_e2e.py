"""End to end on the real tiny MLX model: the user's standing instructions -> LoRA fine-tune in a separate process
-> evaluation gate -> activation; and broken runs (NaN loss, killed worker) that leave everything as it was."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from core.config import SchedulerSettings
from core.finetune import adapters as versions
from core.jobs import standard_specs
from core.scheduler import Environment, Scheduler
from core.store import jobs as store
from tests.finetune_store import first_hour_store, say_standing_instructions
from models.finetune import FineTuner, TrainConfig

pytestmark = pytest.mark.slow

TINY = dict(num_layers=2, rank=8, learning_rate=1e-4, epochs=8, save_every=4, steps_per_report=2)


def add_facts(db):
    """The first-hour store and two standing instructions: what a fine-tune learns is how to answer."""
    store_ids = first_hour_store(db)
    return store_ids, say_standing_instructions(db)


def snapshot(db):
    """Every row of every table but the job queue: what 'the store is unchanged' means."""
    tables = [r["name"] for r in db.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name != 'jobs' "
                                          "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
    return {t: db.query(f"SELECT * FROM \"{t}\"") for t in tables}


def scheduler(db, tuner, idle=lambda: 1e9):
    return Scheduler(db, standard_specs(finetune=tuner), settings=SchedulerSettings(),
                     env=Environment(clock=db.clock, idle_seconds=idle, on_ac_power=lambda: None,
                                     localtime=lambda t: time.struct_time((2026, 1, 1, 2, 0, 0, 3, 1, 0))))


def test_instructions_are_learned_and_the_adapter_is_activated_because_it_improved(db, tiny_model_dir, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # the workers list their imports in their logs
    (facts, instructions) = add_facts(db)
    activated = []
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**TINY),
                      on_activated=activated.append)
    sched = scheduler(db, tuner)
    job = sched.enqueue("finetune", run_now=True)
    final = sched.run_job(job.id)
    assert final.state == "done", final.last_error
    [adapter] = versions.list_adapters(db)
    metrics = adapter.metrics
    base, new = metrics["baseline"], metrics["candidate"]
    # The tiny model measurably learned: the held-out situations' replies became likelier.
    assert new["probe_loss"] < 0.98 * base["probe_loss"]
    assert new["general_ppl"] <= base["general_ppl"] * 1.10
    assert metrics["gate"]["accept"] and adapter.status == "accepted" and adapter.active
    assert activated and activated[0].id == adapter.id and "activated" in final.message
    learned = versions.sources(db, adapter.id)
    assert learned["memory"] == [] and set(instructions) <= set(learned["episode"])  # never a fact
    assert not set(facts["rated"][:2]) & set(learned["episode"])  # rated replies restating a fact are left out
    run_dir = Path(adapter.path).parent
    assert not (run_dir / "data").exists() and not (run_dir / "probes.json").exists()
    for made in [run_dir.parent, *run_dir.rglob("*")]:  # adapters/ and everything in it: the user's alone
        assert made.stat().st_mode & 0o077 == 0, made
    assert "Rex" not in " ".join(p.read_text(errors="ignore") for p in run_dir.rglob("*.json"))
    folder = Path(adapter.path)
    assert (folder / "adapters.safetensors").is_file() and json.loads(
        (folder / "adapter_config.json").read_text())["fine_tune_type"] == "lora"
    # Neither worker imports torch (installed here for the tests' reference embedder): transformers, which mlx-lm's
    # loader and tuner import, would (models.mlx_lm_package.keep_torch_out), seconds of every worker's start.
    for log in ("train.log", "evaluate.log"):
        imported = {line.rsplit("|", 1)[-1].strip() for line in (run_dir / log).read_text().splitlines()
                    if line.startswith("import time:")}
        assert "transformers" in imported and "torch" not in imported, log

    # A broken run (the loss becomes NaN) keeps the previous adapter active and the store unchanged.
    before = snapshot(db)
    nan_rate = TrainConfig(**{**TINY, "learning_rate": float("nan")})
    broken = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", nan_rate)
    sched = scheduler(db, broken)
    job = sched.enqueue("finetune", run_now=True)
    after = sched.run_job(job.id)
    assert after.state in ("queued", "failed") and "loss became nan" in after.last_error
    assert "active adapter is unchanged" in after.last_error
    assert versions.active_adapter(db).id == adapter.id
    assert snapshot(db) == before
    assert after.checkpoint == {}  # the next attempt starts afresh
    assert not list((tmp_path / "adapters").glob(f"run-*-{job.id}"))


def _kill_worker_once_training(db, job_id, killed):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not killed:
        job = store.get_job(db, job_id)
        if job.progress > 0:
            pids = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "models.train_worker"],
                                  capture_output=True, text=True).stdout.split()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
        time.sleep(0.05)


def test_engram_finetune_now_runs_the_recipe_judged_on_the_scores_its_early_stop_measured(tmp_path, tiny_model_dir,
                                                                                          capsys):
    """`engram finetune now` shows steps, loss and time left and runs the recipe (None: the recipe's config; the
    default TrainConfig targets real models' 16 layers, the tiny one has 2). The run scores the base before its first
    step and the weights it keeps, on the gate's own sets: the gate reads those figures instead of loading the model
    again, and they are what a separate scoring measures. (One run for what were three tests' three fine-tunes.)"""
    from app.cli.main import run_cli
    from core.config import Settings, save_settings
    from core.finetune.dataset import build_training_set
    from core.finetune.gate import GENERAL_TEXT, KNOWN_FACTS
    from core.store.db import open_db
    from models.finetune import run_worker
    home = tmp_path / "home"
    save_settings(Settings(chat_model=str(tiny_model_dir)), home)
    db = open_db(home / "engram.db")
    add_facts(db)
    db.close()
    assert run_cli(["--data-dir", str(home), "finetune", "now"]) == 0
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if "step " in line and "loss" in line and "ETA" in line]
    assert steps, out
    assert "checked: held-out probes" in out  # the early stop read the gate's measures while it trained
    assert "fine-tune job 1: done" in out and "held-out probes" in out and "known facts" in out
    assert run_cli(["--data-dir", str(home), "finetune", "adapters"]) == 0
    assert "held-out probes" in capsys.readouterr().out
    db = open_db(home / "engram.db")
    [adapter] = versions.list_adapters(db)
    run_dir = Path(adapter.path).parent
    assert adapter.config["eval_every"] and adapter.metrics["scored_while_training"]
    assert not (run_dir / "evaluate.log").exists()  # no scoring process was started
    probes = [{"question": p.question, "answer": p.answer, "kind": p.kind, "rejected": p.rejected}
              for p in build_training_set(db).probes]
    db.close()
    check = run_worker("evaluate", {"model": str(tiny_model_dir), "adapters": [None, adapter.path], "probes": probes,
                                    "general": list(GENERAL_TEXT),
                                    "known_facts": [{"question": q, "answer": a} for q, a in KNOWN_FACTS]},
                       tmp_path / "check")
    separate = check.last("scores")["results"]
    for recorded, measured in ((adapter.metrics["baseline"], separate[0]), (adapter.metrics["candidate"], separate[1])):
        for name in ("probe_loss", "general_ppl", "known_fact_loss"):
            assert recorded[name] == pytest.approx(measured[name], rel=1e-3), name


def test_a_killed_training_process_leaves_the_previous_adapter_and_store(tmp_path, tiny_model_dir):
    from core.store.db import open_db
    db = open_db(tmp_path / "e.db")
    add_facts(db)
    previous = versions.record_adapter(db, name="before", base_model=str(tiny_model_dir), path="/nowhere",
                                       status="accepted", metrics={}, config={}, sources={})
    versions.activate(db, previous.id)
    before = snapshot(db)
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**{**TINY, "epochs": 200}))
    sched = scheduler(db, tuner)
    job = sched.enqueue("finetune", run_now=True)
    watcher_db = open_db(tmp_path / "e.db")
    killed: list[int] = []
    watcher = threading.Thread(target=_kill_worker_once_training, args=(watcher_db, job.id, killed))
    watcher.start()
    after = sched.run_job(job.id)
    watcher.join()
    assert killed, "the training process was never seen"
    assert after.state == "queued" and "killed by signal 9" in after.last_error
    assert versions.active_adapter(db).id == previous.id
    assert snapshot(db) == before
    watcher_db.close()
    db.close()


def test_a_fine_tune_yields_to_the_user_and_resumes_from_its_checkpoint(db, tiny_model_dir, tmp_path, monkeypatch):
    add_facts(db)
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**{**TINY, "epochs": 12}))
    state = {"user_back": True}

    def idle():
        # The user comes back as soon as training has made progress.
        return 0.0 if state["user_back"] and store.get_job(db, job.id).progress > 0 else 1e9
    sched = scheduler(db, tuner, idle=idle)
    job = sched.enqueue("finetune")
    yielded = sched.run_job(job.id)
    assert yielded.state == "queued" and yielded.checkpoint["phase"] == "train"
    assert yielded.message == "stopped: user is active"
    saved = json.loads((Path(yielded.checkpoint["run_dir"]) / "adapter" / "checkpoint" / "state.json").read_text())
    assert 0 < saved["step"] < yielded.checkpoint["iters"]
    assert versions.list_adapters(db) == []
    state["user_back"] = False
    steps, heartbeat = [], store.heartbeat
    monkeypatch.setattr(store, "heartbeat", lambda db, job_id, **kw: (steps.append(kw.get("message", "")),
                                                                       heartbeat(db, job_id, **kw))[1])
    done = sched.run_next()
    assert done.state == "done", done.last_error
    # the worker's config (it holds the held-out probes' text) goes once the adapter is scored
    assert not (Path(yielded.checkpoint["run_dir"]) / "train.json").exists()
    first = next(int(m.split()[1].split("/")[0]) for m in steps if m.startswith("step "))
    assert first > saved["step"]  # it went on from the checkpoint, not from step 0
    assert versions.list_adapters(db)[0].metrics["candidate"]["probe_loss"] < \
        versions.list_adapters(db)[0].metrics["baseline"]["probe_loss"]


def test_cancelling_a_running_fine_tune_removes_its_run(db, tiny_model_dir, tmp_path):
    add_facts(db)
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**{**TINY, "epochs": 200}))

    def idle():
        job_row = store.get_job(db, job.id)
        if job_row.progress > 0 and job_row.requested is None and job_row.state == "running":
            store.request(db, job.id, "cancel")  # the user presses Cancel in the Jobs panel
        return 1e9
    sched = scheduler(db, tuner, idle=idle)
    job = sched.enqueue("finetune")  # an idle-time run: its conditions (and so idle()) are polled while it trains
    final = sched.run_job(job.id)
    assert final.state == "cancelled" and final.checkpoint == {}
    assert not list((tmp_path / "adapters").glob("run-*")) and versions.list_adapters(db) == []


def test_the_user_coming_back_while_the_adapter_is_scored_stops_the_scoring(db, tiny_model_dir, tmp_path):
    add_facts(db)
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**TINY))
    state = {"user_back": True, "polls": 0}

    def idle():  # the user returns while the scoring process runs (a few polls after it started)
        if store.get_job(db, job.id).message.startswith("scoring"):
            state["polls"] += 1
        return 0.0 if state["user_back"] and state["polls"] >= 3 else 1e9
    sched = scheduler(db, tuner, idle=idle)
    job = sched.enqueue("finetune")
    yielded = sched.run_job(job.id)
    assert yielded.state == "queued" and yielded.checkpoint["phase"] == "evaluate"
    assert yielded.message == "stopped: user is active"
    assert versions.list_adapters(db) == []  # nothing recorded from a half-done scoring
    assert (Path(yielded.checkpoint["run_dir"]) / "evaluate.json").exists()  # the scoring process had started
    state["user_back"] = False
    done = sched.run_next()
    assert done.state == "done", done.last_error
    assert len(versions.list_adapters(db)) == 1  # scored from the start, recorded once


def test_forget_everything_while_the_new_adapter_is_scored_keeps_nothing_it_learned(db, tiny_model_dir, tmp_path,
                                                                                      monkeypatch):
    """The wipe asks a running fine-tune to cancel; when the scoring process ends before it sees the request, the
    adapter it scored (trained on what is now forgotten) was recorded and switched on after the wipe had switched
    the old one off."""
    import models.finetune as finetune
    from core.store.wipe import forget_everything
    add_facts(db)
    real_worker = finetune.run_worker

    def worker_then_wipe(mode, config, folder, **kwargs):
        result = real_worker(mode, config, folder, **kwargs)
        if mode == "evaluate":  # the user chose Forget everything as the scores came back
            forget_everything(db, tmp_path / "backups")
        return result
    monkeypatch.setattr(finetune, "run_worker", worker_then_wipe)
    tuner = FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", TrainConfig(**TINY))
    sched = scheduler(db, tuner)
    job = sched.enqueue("finetune", run_now=True)
    final = sched.run_job(job.id)
    assert final.state == "cancelled", (final.state, final.message)
    assert versions.list_adapters(db) == [] and versions.active_adapter(db) is None
    assert not list((tmp_path / "adapters").glob("run-*")), "the run's data and adapter stay on disk"


@pytest.mark.heavy  # three trainings (16 s at load 4, 160 s at 7); tests/test_finetune_cooling.py drives the logic
def test_a_run_too_hot_for_the_model_starts_again_cooler_on_the_real_worker(db, tiny_model_dir, tmp_path):
    """Margins no reading can keep (plain text may not move at all): each run's first reading breaks them, so the
    real worker trains again from the base at a quarter of the rate, twice, then the gate refuses the last run."""
    from core.finetune.gate import GateSettings
    add_facts(db)
    tight = GateSettings(max_general_ppl_rise=-0.5)
    config = TrainConfig(**{**TINY, "epochs": 1, "num_layers": 1, "rank": 2, "steps": 2, "eval_every": 1})
    sched = scheduler(db, FineTuner(db, str(tiny_model_dir), tmp_path / "adapters", config, gate=tight))
    final = sched.run_job(sched.enqueue("finetune", run_now=True).id)
    assert final.state == "done", final.last_error
    [adapter] = versions.list_adapters(db)
    assert adapter.status == "rejected" and "kept the active one" in final.message
    rates = [hot["learning_rate"] for hot in adapter.metrics["too_hot"]] + [adapter.config["learning_rate"]]
    assert rates == pytest.approx([1e-4, 2.5e-5, 6.25e-6])
    assert all(hot["step"] == 1 for hot in adapter.metrics["too_hot"]), adapter.metrics["too_hot"]
    events = [json.loads(line) for line in (Path(adapter.path).parent / "train.log").read_text().splitlines()
              if line.startswith("{")] if (Path(adapter.path).parent / "train.log").exists() else []
    assert [e for e in events if e.get("verdict") == "base"][:1] == [e for e in events if e.get("verdict") == "base"]
