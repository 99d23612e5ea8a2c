"""A chat turn through the window's own path: `python -m bench.turn_window [--n 100000] [--turns 40] [--json]`.

bench/turn.py times the turn's memory work in one thread. A person waits for more: Return in the real window
(offscreen Qt, a fresh process, app.__main__.main) starts the turn on the model lane (the chat engine), recall and
the prompt run on the db lane, the reply streams from the model lane back to the GUI thread, and the stored turn is
indexed (the reply's own embedding) on the db lane after the last token. Here the window opens a copy of
bench/realstore.py's store of N real-text memories with the tiny test model (models/testing.py) chosen, and sends
the data's own questions one after another, each once the previous turn's learning has ended (a person reading
the reply). Per turn:
  - `return_to_first_token_ms`: Return → the first streamed words reach the chat panel (GUI thread);
  - `model_first_token_ms`: the model's own part of it (the turn's ReplyPace: prompt handed to the model → its
    first token; the prefill of this tiny model);
  - `window_wait_ms` = the first minus the second: what a person waits for that is not the model's prefill
    (the lane hops, the query's embedding, recall, the prompt), the figure judged against the turn's ≤ 20 ms;
  - `return_to_prepared_ms`: Return → the prepared turn (recall and the prompt) back on the GUI thread, and
    `prepare_on_db_lane_ms`, Assistant.prepare's own time inside it (the rest: the lanes' hops and queues);
  - `after_reply_ms`: the last streamed words → the turn stored and indexed (its embedding) on the db lane.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import realstore, realtext  # noqa: E402
from bench.cold import child_env  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402

DRIVER = """
import json, os, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

QUESTIONS = json.loads(sys.argv[1])
rows, state = [], {}

import core.assistant
_prepare = core.assistant.Assistant.prepare
def _timed_prepare(*args, **kwargs):  # its own time on the db lane: the rest of Return → prepared is lane hops
    started = time.perf_counter()
    try:
        return _prepare(*args, **kwargs)
    finally:
        state["prepare_s"] = time.perf_counter() - started
core.assistant.Assistant.prepare = _timed_prepare

def _report(outcome):
    print("TURNS " + json.dumps({"rows": rows, "outcome": outcome}), flush=True)
    os._exit(0)  # a throw-away data folder: no orderly close needed

def _start(app):
    window = next(w for w in app.topLevelWidgets() if hasattr(w, "show_panel") and w.isVisible())
    panel = state["panel"] = window.show_panel("chat")
    turns = panel.turns
    def chunk(text):
        now = time.perf_counter()
        if text and "first" not in state:
            state["first"] = now
        if text:
            state["last"] = now
    turns.chunk.connect(chunk)
    turns.pace.connect(lambda pace: state.__setitem__("model_first", pace.first_token_seconds))
    turns.prepared.connect(lambda _p: state.__setitem__("prepared", time.perf_counter()))
    turns.finished.connect(lambda *_: state.__setitem__("finished", time.perf_counter()))
    turns.failed.connect(lambda message, _no: _report("failed: " + message))
    QTimer.singleShot(0, lambda: _send(0))

def _send(index):
    if index >= len(QUESTIONS):
        _report("done")
    for key in ("first", "last", "model_first", "finished", "prepared", "prepare_s"):
        state.pop(key, None)
    state["index"], state["return"] = index, time.perf_counter()
    state["panel"].send(QUESTIONS[index])
    _wait_quiet(index, time.perf_counter())

def _wait_quiet(index, since):
    turns = state["panel"].turns
    quiet = ("finished" in state and "model_first" in state and not turns.busy and turns.learning is None
             and not turns.to_learn)
    if quiet or time.perf_counter() - since > 120:
        if "first" in state and "finished" in state:
            rows.append({"return_to_first_token_ms": (state["first"] - state["return"]) * 1000,
                         "model_first_token_ms": state.get("model_first", 0.0) * 1000,
                         "return_to_prepared_ms": (state.get("prepared", state["first"]) - state["return"]) * 1000,
                         "prepare_ms": state.get("prepare_s", 0.0) * 1000,
                         "after_reply_ms": (state["finished"] - state["last"]) * 1000,
                         "learning_waited": not quiet})
        QTimer.singleShot(200, lambda: _send(index + 1))
        return
    QTimer.singleShot(20, lambda: _wait_quiet(index, since))

_exec = QApplication.exec
def _exec_and_start(*_args):
    app = QApplication.instance()
    QTimer.singleShot(0, lambda: _start(app))
    QTimer.singleShot(1_500_000, lambda: _report("timed out"))
    return _exec()
QApplication.exec = _exec_and_start
from app.__main__ import main
sys.exit(main([]))  # the data folder is ENGRAM_HOME
"""


def run(n: int, turns: int, *, log=print) -> dict:
    from models.testing import TinyModelSpec, build_tiny_model
    header = stamp("turn_window")
    store = realstore.build(n, log=log)
    asked = realtext.questions(turns + 1, seed=29)
    with tempfile.TemporaryDirectory(prefix="engram-turn-window-") as folder:
        # a context as long as SmolLM2's: the tiny tokenizer's 512 tokens make a recalled real-text context long
        model = build_tiny_model(Path(folder) / "tiny-4bit", TinyModelSpec(context_length=8192))
        data = store.copy_to(Path(folder) / "data")
        (data / "settings.json").write_text(json.dumps({"chat_model": str(model), "onboarding_seen": True}),
                                            encoding="utf-8")
        env = child_env(QT_QPA_PLATFORM="offscreen", ENGRAM_HOME=str(data))
        done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(asked)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)
    line = next((x for x in done.stdout.splitlines() if x.startswith("TURNS ")), None)
    if line is None:
        raise RuntimeError(f"the window reported nothing: {done.stderr.strip()[-600:]}")
    report = json.loads(line[len("TURNS "):])
    rows = report["rows"][1:]  # the first turn loads the embedder and the model
    if not rows:
        raise RuntimeError(f"no timed turn: {report['outcome']}")
    waits = [r["return_to_first_token_ms"] - r["model_first_token_ms"] for r in rows]
    return {**header, "n": n, "turns": len(rows), "outcome": report["outcome"],
            "model": "tiny 4-bit qwen2 (models/testing.py), 8,192-token context",
            "store": {"memories": store.memories, "episodes": store.episodes},
            "window_wait_ms": _percentiles(waits),
            "return_to_first_token_ms": _percentiles([r["return_to_first_token_ms"] for r in rows]),
            "model_first_token_ms": _percentiles([r["model_first_token_ms"] for r in rows]),
            "after_reply_ms": _percentiles([r["after_reply_ms"] for r in rows]),
            "return_to_prepared_ms": _percentiles([r["return_to_prepared_ms"] for r in rows]),
            "prepare_on_db_lane_ms": _percentiles([r["prepare_ms"] for r in rows]),
            "turns_whose_learning_outlasted_120_s": sum(r["learning_waited"] for r in rows),
            "target_window_wait_p95_ms": 20.0, "load_average_1m_at_end": load_average()}


def _percentiles(times: list[float]) -> dict[str, float]:
    p50, p95, p99 = np.percentile(times, [50, 95, 99])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "p99": round(float(p99), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    log = (lambda *_: None) if args.json else (lambda *p: print(*p, file=sys.stderr, flush=True))
    print(json.dumps(run(args.n, args.turns, log=log), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
