"""The fine-tuning worker dies with the process that started it (issue 13.12: a killed `engram finetune now` left
its models.train_worker child training for ever)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from models.train_worker import watch_parent

ROOT = Path(__file__).resolve().parents[2]


def test_the_watch_asks_the_worker_to_stop_once_its_parent_is_gone(monkeypatch):
    parents = iter([100, 100, 1])  # the parent dies after two polls; the worker is adopted by init
    sent = []
    monkeypatch.setattr("models.train_worker.os.kill", lambda pid, sig: sent.append(sig))
    monkeypatch.setattr("models.train_worker.os._exit", lambda code: sent.append(("exit", code)))
    watch_parent(100, poll=0.001, grace=0.001, getppid=lambda: next(parents)).join(5)
    assert sent[0] == signal.SIGTERM and sent[1][0] == "exit"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return True


def _orphan_stops(tmp_path: Path, mode: str, config: dict, started: str) -> None:
    """Start the worker from a parent process, kill the parent once `started` shows in the worker's events."""
    path = tmp_path / f"{mode}.json"
    path.write_text(json.dumps(config))
    (tmp_path / "events.log").write_text("")
    parent_code = textwrap.dedent(f"""
        import subprocess, sys, time
        worker = subprocess.Popen([sys.executable, "-m", "models.train_worker", {mode!r}, {str(path)!r}],
                                  cwd={str(ROOT)!r}, stdout=open({str(tmp_path / 'events.log')!r}, "w"))
        print(worker.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    deadline = time.monotonic() + 120
    while started not in (tmp_path / "events.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not started:  # a training step shows it is at work; scoring prints nothing until it ends, so time tells
        time.sleep(3)  # well into its work
    assert _alive(worker)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"the {mode} worker went on after its parent was killed"


def test_a_training_worker_whose_parent_is_killed_stops(tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"messages": [{"role": "user", "content": f"What is fact {n}?"},
                          {"role": "assistant", "content": f"Fact {n} is about the user."}]} for n in range(8)]
    (data / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    _orphan_stops(tmp_path, "train", {"model": str(tiny_model_dir), "adapter_dir": str(tmp_path / "adapter"),
                                      "data_dir": str(data), "iters": 100_000, "batch_size": 2, "num_layers": 2,
                                      "save_every": 100_000}, started='"step"')


def test_a_scoring_worker_whose_parent_is_killed_stops(tmp_path, tiny_model_dir):
    """Scoring has no steps to check between: before the watch, an orphaned scoring ran to its end."""
    probes = [{"question": f"What is fact {n}?", "answer": f"Fact {n} is about the user."} for n in range(20_000)]
    (tmp_path / "events.log").write_text("")
    _orphan_stops(tmp_path, "evaluate", {"model": str(tiny_model_dir), "adapters": [None], "probes": probes,
                                         "general": ["plain text"]}, started="")
