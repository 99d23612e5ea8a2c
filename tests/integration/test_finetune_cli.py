"""`engram finetune now|status` on the real tiny MLX model (issue 42): a store with too little to learn queues nothing
and says why; a run shows steps, loss and time left (tested with the recipe's run in test_finetune_e2e.py); Ctrl-C
in the terminal (SIGINT to the whole process group, the training process included) stops it at a checkpoint, and the
next `finetune now` resumes from it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.config import Settings, save_settings
from core.store import jobs as store
from core.store.db import open_db
from core.store.episodes import add_episode
from tests.finetune_store import first_hour_store

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def home_with(tmp_path, tiny_model_dir, fill):
    home = tmp_path / "home"
    save_settings(Settings(chat_model=str(tiny_model_dir)), home)
    db = open_db(home / "engram.db")
    fill(db)
    db.close()
    return home


def test_the_first_hour_store_queues_no_fine_tune_and_says_why(tmp_path, tiny_model_dir, capsys):
    from app.cli.main import run_cli
    home = home_with(tmp_path, tiny_model_dir, first_hour_store)
    assert run_cli(["--data-dir", str(home), "finetune", "now"]) == 0
    out = capsys.readouterr().out
    assert "no fine-tune queued: not enough to learn how you like answers yet: 1 example (at least 4)" in out
    assert run_cli(["--data-dir", str(home), "finetune", "status"]) == 0
    assert "next fine-tune: none queued; not enough to learn" in capsys.readouterr().out
    db = open_db(home / "engram.db")
    assert store.list_jobs(db) == []
    db.close()


# A run's steps, loss and time left (and its recipe judged on its early stop's scores): tests/integration/
# test_finetune_e2e.py::test_engram_finetune_now_runs_the_recipe_judged_on_the_scores_its_early_stop_measured


def _many_rated_replies(db):
    """Enough rated replies that the recipe runs its longest (200 steps): time to press Ctrl-C."""
    for n in range(400):
        episode = add_episode(db, f"Give me tip number {n}.", f"Tip {n}: drink water and take short walks.")
        db.execute("UPDATE episodes SET rating = 1 WHERE id = ?", (episode,))


def _start(home):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "app", "--data-dir", str(home), "finetune", "now"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own group: SIGINT to the group is a terminal's Ctrl-C


def test_ctrl_c_stops_at_a_checkpoint_and_the_next_run_resumes(tmp_path, tiny_model_dir):
    home = home_with(tmp_path, tiny_model_dir, _many_rated_replies)
    proc = _start(home)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.strip().split()[1:2] and "step " in line and "loss" in line:
                os.killpg(proc.pid, signal.SIGINT)
                break
        lines += proc.stdout.readlines()
        assert proc.wait(timeout=120) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = "".join(lines)
    assert "Traceback" not in out and "stopped" in out, out
    db = open_db(home / "engram.db")
    [job] = store.list_jobs(db)
    assert job.state == "queued" and job.checkpoint["phase"] == "train", (job.state, job.message, job.last_error)
    saved = Path(job.checkpoint["run_dir"]) / "adapter" / "checkpoint" / "state.json"
    stopped_at = json.loads(saved.read_text())["step"]
    assert 0 < stopped_at < job.checkpoint["iters"]
    db.close()
    time.sleep(0.2)
    assert not subprocess.run(["pgrep", "-f", f"train_worker train {job.checkpoint['run_dir']}"],
                              capture_output=True).stdout  # the training process stopped with it
