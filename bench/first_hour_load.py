"""Learning and Run now on a loaded machine: `python -m bench.first_hour_load` (prints JSON).

Issue 38 asks that, with another process keeping both cores busy, learning a turn and a reflection the user starts
with Run now both start within a bounded time after the chat is quiet. This runs the real window (offscreen), the
real store, the bundled embedder, the chat panel's learning queue, the idle-time loop (BackgroundJobs, its
ModelGate) and Hypotheses → Reflect now, with a slow scripted chat model (words streamed with a pause between
them) and a slow scripted structured model (each answer takes --model-seconds, asking between its "tokens" whether
to give way, as the real generator does). Nothing is waited for by a sleep of the bench's own: each time is read
off the event that marks it.

Measured twice in one run, first on the machine as it is (the baseline), then with a CPU burner on every core (a
subprocess per core spinning in pure Python, started before the turn and stopped after it):
- quiet_to_learning_s: from the reply being stored with nothing waiting (the chat is quiet) to the learner's first
  model call for that turn;
- run_now_to_reflection_s: from the click on Reflect now, made while that turn is being learned, to the
  reflection job running (its state in the store); `waited_for` is what the Hypotheses panel said it waited for.
Each is compared with --target-seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import stamp  # noqa: E402
from core.errors import GenerationStopped  # noqa: E402
from core.protocols import GenerationChunk  # noqa: E402

BURN = "while True: pass"
STEPS = 20  # "tokens" of a slow structured answer, between which it asks whether to give way
# Both need the model (core.memory.unread): a message the plain patterns read whole is learned without one, and the
# bench times the hand-over of the model to learning.
MESSAGES = ("I play the cello every evening after work.", "My sister Ana teaches the violin at a school in Porto.")


class SlowChat:
    """A chat model that writes a short reply a word at a time, with a pause between words."""

    def __init__(self, word_seconds: float) -> None:
        self.word_seconds = word_seconds

    def stream(self, messages: Sequence[Any], sampling: Any, *, cancel: threading.Event | None = None
               ) -> Iterator[GenerationChunk]:
        words = "That sounds lovely; tell me more about it when you like.".split(" ")
        for i, word in enumerate(words):
            if cancel is not None and cancel.is_set():
                yield GenerationChunk("", finish_reason="cancelled")
                return
            time.sleep(self.word_seconds)
            last = i == len(words) - 1
            yield GenerationChunk(word + ("" if last else " "), generation_tokens=i + 1,
                                  finish_reason="stop" if last else None)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1


class SlowStructured:
    """Answers any schema with its smallest valid value, taking `seconds`; records when each call began."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls: list[tuple[float, str, str]] = []  # (monotonic time, schema title, last message's text)
        self.model = self

    def generate_json(self, messages: Sequence[Any], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      stop: Callable[[], bool] | None = None) -> dict[str, Any]:
        title = str(schema.get("title", ""))
        self.calls.append((time.monotonic(), title, messages[-1].content if messages else ""))
        for _ in range(STEPS):
            if stop is not None and stop():
                raise GenerationStopped(f"gave way while answering {title!r}")
            time.sleep(self.seconds / STEPS)
        return smallest(schema)

    def first_call_after(self, since: float, title: str) -> float | None:
        return next((at for at, t, _ in self.calls if at >= since and t == title), None)


def smallest(schema: Mapping[str, Any]) -> Any:
    """The smallest value a JSON Schema (core.prompts' subset) accepts."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: smallest(properties[name]) for name in schema.get("required", properties)}
    if kind == "array":
        return [smallest(schema.get("items", {})) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * int(schema.get("minLength", 0))


def burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]


def stop_burners(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
        process.wait()


class Bench:
    def __init__(self, folder: Path, args: argparse.Namespace) -> None:
        from PySide6.QtWidgets import QApplication

        from app.services.wiring import Services
        from app.ui.background_jobs import BackgroundJobs
        from app.ui.main_window import MainWindow
        from core.scheduler import Environment
        self.app = QApplication.instance() or QApplication(["engram-bench"])
        self.args = args
        self.structured = SlowStructured(args.model_seconds)
        self.services = Services.from_data_dir(folder)
        self.services.chat = SlowChat(args.word_seconds)
        self.services.structured_model = lambda: self.structured
        _ = self.services.embedder  # loaded before anything is timed
        self.window = MainWindow(self.services)
        self.window.show()
        user_here = lambda db, _activity, gate: Environment(  # noqa: E731 - the user is at the window
            clock=db.clock, idle_seconds=lambda: 0.0, on_ac_power=lambda: True, model_gate=gate)
        self.window.background = BackgroundJobs(self.services, poll_seconds=0.5, environment=user_here).start(
            self.app)
        from core.store.db import open_db
        self.reader = open_db(self.services.db_path)  # the bench's own connection, on this thread
        self.chat = self.window.show_panel("chat")
        self.hypotheses = self.window.show_panel("hypotheses")
        self.window.show_panel("chat")
        self.spin(2.0)

    def spin(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.app.processEvents()
            if until is not None and until():
                return True
            time.sleep(0.005)
        return until() if until is not None else True

    def turn(self, text: str) -> dict[str, Any]:
        """One message: when the chat went quiet, when learning began, and Reflect now while it learns."""
        stored: list[float] = []
        self.chat.reply_finished.connect(lambda _reply: stored.append(time.monotonic()))
        self.chat.send(text)
        limit = self.args.limit_seconds
        if not self.spin(limit, until=lambda: bool(stored) and not self.chat.turns.busy):
            return {"error": f"no reply stored within {limit} s"}
        quiet = time.monotonic()  # the reply is stored and nothing waits: the chat is quiet from here
        if not self.spin(limit, until=lambda: self.structured.first_call_after(stored[0], "engram_facts")):
            return {"error": f"learning did not start within {limit} s of the quiet chat"}
        learning = self.structured.first_call_after(stored[0], "engram_facts")
        before = self.reader.scalar("SELECT coalesce(max(id), 0) FROM jobs WHERE kind = 'reflection'")
        self.hypotheses.message.setText("")  # what the last turn's click said
        clicked = time.monotonic()
        self.hypotheses.reflect_button.click()
        self.spin(limit, until=lambda: bool(self.hypotheses.message.text()))
        said = self.hypotheses.message.text()
        job_running = self.spin(limit, until=lambda: self._reflection_running(before))
        running = time.monotonic()
        self.spin(limit, until=lambda: self.hypotheses.message.text().startswith("Reflection finished"))
        result = {"quiet_to_learning_s": round(learning - quiet, 3),
                  "run_now_to_reflection_s": round(running - clicked, 3) if job_running else None,
                  "waited_for": said, "reflection_ended": self.hypotheses.message.text()}
        self.spin(limit, until=lambda: self.chat.turns.learning is None and not self.chat.turns.to_learn)
        return result

    def _reflection_running(self, before: int) -> bool:
        """The reflection Reflect now queued (a job newer than `before`) has started."""
        state = self.reader.scalar(
            "SELECT state FROM jobs WHERE kind = 'reflection' AND id > ? ORDER BY id DESC LIMIT 1", (before,))
        return state in ("running", "done", "failed")

    def close(self) -> None:
        self.window.background.stop()
        self.chat.shutdown()
        self.window.runner.shutdown(wait=True)
        self.window.close()
        self.reader.close()
        self.services.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-seconds", type=float, default=4.0, help="each structured answer's time")
    parser.add_argument("--word-seconds", type=float, default=0.05, help="the chat model's pause per word")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="CPU burners (one per core)")
    parser.add_argument("--target-seconds", type=float, default=10.0)
    parser.add_argument("--limit-seconds", type=float, default=300.0, help="give up on a step after this long")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    result = stamp("first_hour_load")
    result.update(model_seconds=args.model_seconds, burners=args.burners, target_seconds=args.target_seconds,
                  what_is_waited_for={"quiet_to_learning_s": "the learner's first model call for the turn, after "
                                      "its reply is stored and no message waits",
                                      "run_now_to_reflection_s": "the reflection job in the store as running, after "
                                      "the click on Reflect now made while that turn is being learned"})
    with tempfile.TemporaryDirectory() as folder:
        bench = Bench(Path(folder) / "data", args)
        try:
            result["baseline"] = bench.turn(MESSAGES[0])
            processes = burners(args.burners)
            try:
                bench.spin(2.0)  # the burners take the cores
                result["loaded"] = bench.turn(MESSAGES[1])
                result["loaded"]["load_average_1min"] = round(os.getloadavg()[0], 2)
            finally:
                stop_burners(processes)
        finally:
            bench.close()
    loaded = result["loaded"]
    result["within_target"] = all(isinstance(loaded.get(k), (int, float)) and loaded[k] <= args.target_seconds
                                  for k in ("quiet_to_learning_s", "run_now_to_reflection_s"))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
