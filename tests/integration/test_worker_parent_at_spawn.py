"""A worker whose parent dies before the worker started watching it stops too (issue 37, item 6): the watch began
only after the worker's imports (~0.6 s), so a parent killed in that window left a fine-tune or a GGUF conversion
running with ppid 1. The parent's pid is handed over at spawn and checked first; on Linux the kernel also signals
the worker when its parent dies (PR_SET_PDEATHSIG)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from models import parent_guard

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return True


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


@pytest.mark.parametrize("module, argv", [
    ("models.train_worker", ["train", "/nonexistent/config.json"]),
    ("models.gguf_worker", ["/nonexistent/model.gguf", "/nonexistent/out"]),
])
def test_a_worker_told_of_a_parent_that_is_not_its_own_stops_at_once(module, argv):
    """The pid given at spawn is not the worker's parent any more: the parent died before the worker ran."""
    env = {**os.environ, parent_guard.PARENT_ENV: str(2**22 + 12345)}  # no live process has it as a child
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == parent_guard.EXIT_PARENT_GONE, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""  # it did nothing at all


def test_a_fine_tune_whose_parent_dies_right_after_spawning_it_stops(tmp_path, tiny_model_dir):
    """The parent runs the product's own run_worker and dies the moment the worker is spawned, before the worker
    imported anything."""
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"messages": [{"role": "user", "content": f"What is fact {n}?"},
                          {"role": "assistant", "content": f"Fact {n} is about the user."}]} for n in range(8)]
    (data / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    config = {"model": str(tiny_model_dir), "adapter_dir": str(tmp_path / "adapter"), "data_dir": str(data),
              "iters": 100_000, "batch_size": 2, "num_layers": 2, "save_every": 100_000}
    parent_code = textwrap.dedent(f"""
        import os, subprocess, sys
        sys.path.insert(0, {str(ROOT)!r})
        real = subprocess.Popen
        def spawn_then_die(*args, **kwargs):
            worker = real(*args, **kwargs)
            print(worker.pid, flush=True)
            os._exit(0)
        subprocess.Popen = spawn_then_die
        from pathlib import Path
        from models.finetune import run_worker
        run_worker("train", {config!r}, Path({str(tmp_path / 'run')!r}))
    """)
    parent = subprocess.run([sys.executable, "-c", parent_code], capture_output=True, text=True, timeout=120)
    worker = int(parent.stdout.split()[0])
    assert _wait_gone(worker, 60), "the worker went on training after its parent died"


def test_the_guard_exits_when_the_parent_is_gone_before_it_ran(monkeypatch):
    exits = []
    monkeypatch.setenv(parent_guard.PARENT_ENV, "4242")
    monkeypatch.setattr(parent_guard.os, "_exit", lambda code: exits.append(code))
    parent_guard.stop_with_parent(getppid=lambda: 1, watch=False)
    assert exits == [parent_guard.EXIT_PARENT_GONE]


def test_the_environment_handed_to_a_worker_names_this_process():
    assert parent_guard.child_env()[parent_guard.PARENT_ENV] == str(os.getpid())
