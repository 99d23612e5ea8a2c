"""The GUI thread never stalls: a 10 ms timer keeps firing while a reply streams from the tiny MLX model and
the real consolidation job (B2's handler through the real scheduler) runs on its own thread and connection.

The promise is that background work never blocks the GUI thread: a reply's generation or a consolidation step run
there (or the GUI waiting on their lock) freezes the window for seconds. The longest gap is compared with the same
probe's longest gap on the idle event loop in the same run (a ratio, as the benches do), with a floor of a second:
on a loaded machine (load 8 on two cores here) scheduling alone gave 150–400 ms hitches and a bare ratio flaked.
The test's own send() calls — the GUI's own work on Return, building the message's widgets — are left out of the
gaps: their cost is a speed figure, timed by bench/first_hour_load.py, not this test's promise."""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QTimer  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.conditions import ModelGate  # noqa: E402
from core.config import GenerationSettings, Settings  # noqa: E402
from core.jobs import CONSOLIDATION  # noqa: E402
from core.memory.index import ensure_bound  # noqa: E402
from core.scheduler import Environment  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from core.store.vectors import upsert_vectors  # noqa: E402

PROBE_MS = 10
IDLE_SECONDS = 2.0  # the idle baseline: long enough to meet the machine's own scheduling hiccups
MAX_STALL_RATIO = 10.0  # idle here: ~11 ms longest gap, so ~110 ms allowed under load (the old fixed limit: 100 ms)
STALL_FLOOR_MS = 1000.0  # a real block (generation or a job step on the GUI thread) lasts seconds
TOPICS = ("cello practice", "the garden's tomatoes", "a trip to Lyon", "Python packaging", "baking sourdough",
          "running a 10k", "learning Japanese", "the cat's vet visit")


class GapProbe:
    """A timer on the GUI thread; the longest time between two of its ticks is the longest stall."""

    def __init__(self, interval_ms: int = PROBE_MS) -> None:
        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def start(self) -> None:
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def max_gap_ms(self, start: float, end: float, leave_out: Sequence[tuple[float, float]] = ()) -> float:
        """The longest gap between ticks in [start, end], except gaps that overlap a left-out interval."""
        inside = [t for t in self.ticks if start <= t <= end]
        gaps = [(b - a) * 1000.0 for a, b in zip(inside, inside[1:])
                if not any(a < out_end and b > out_start for out_start, out_end in leave_out)]
        return max(gaps, default=float("inf"))


def _near(topic_vectors: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Vectors scattered around the topics' real embeddings (embedding a thousand texts would take a minute)."""
    rows = topic_vectors[np.arange(count) % len(topic_vectors)] + rng.normal(0, 0.02, (count, topic_vectors.shape[1]))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _seed(path, embedder) -> None:
    """Old-enough episodes in a few topics (clusters to summarise) and memories to link by similarity."""
    db = open_db(path)
    now, rng = time.time(), np.random.default_rng(0)
    topics = embedder.embed([f"Today I spent an hour on {t}" for t in TOPICS])
    ensure_bound(db, embedder)
    with db.transaction():
        episodes = [add_episode(db, f"Today I spent an hour on {TOPICS[i % len(TOPICS)]} (note {i})",
                                "Sounds good.", created_at=now - 7200 - i * 60) for i in range(120)]
        memories = [add_memory(db, f"User cares about {TOPICS[i % len(TOPICS)]}, detail {i}") for i in range(600)]
        upsert_vectors(db, "episode", episodes, _near(topics, len(episodes), rng))
        upsert_vectors(db, "memory", memories, _near(topics, len(memories), rng))
    db.close()


def _consolidate_in_background(services: Services, timings: dict) -> threading.Thread:
    """The real scheduler on its own connection and thread, told the user is idle and on power."""
    def run() -> None:
        db = open_db(services.db_path)
        try:
            env = Environment(idle_seconds=lambda: 3600.0, on_ac_power=lambda: True, model_gate=ModelGate())
            scheduler = services.scheduler(db=db, env=env)
            job = scheduler.enqueue(CONSOLIDATION, run_now=True)
            timings["start"] = time.perf_counter()
            timings["job"] = scheduler.run_job(job.id)
            timings["end"] = time.perf_counter()
        except BaseException as exc:
            timings["error"] = exc
        finally:
            db.close()
    thread = threading.Thread(target=run, name="test-consolidation", daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # about 40 s: a consolidation pass that writes its summaries with the tiny model
def test_gui_never_stalls_while_a_reply_streams_and_consolidation_runs(qtbot, tmp_path, tiny_engine, embedder):
    home = tmp_path / "home"
    home.mkdir()
    _seed(home / "engram.db", embedder)
    settings = Settings().replace(generation=GenerationSettings(max_tokens=400))
    services = Services(settings=settings, data_dir=home, _embedder=embedder, chat=tiny_engine)
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("chat")
    probe = GapProbe()
    probe.start()
    qtbot.wait(500)  # the panel's first loads
    quiet_from = time.perf_counter()
    qtbot.wait(int(IDLE_SECONDS * 1000))  # nothing else running: the probe's own longest gap on this machine now
    baseline = max(probe.max_gap_ms(quiet_from, time.perf_counter()), float(PROBE_MS))
    panel.incognito.setChecked(True)  # replies back to back, without learning queued between them on the model
    streaming: list[list[float]] = []  # [first chunk, finished] of each reply
    panel.turns.chunk.connect(lambda _t: streaming[-1].append(time.perf_counter()) if not streaming[-1] else None)
    panel.turns.finished.connect(lambda *_: streaming[-1].append(time.perf_counter()))
    timings: dict = {}
    sends: list[tuple[float, float]] = []  # the test's own calls on the GUI thread, outside the event loop
    worker = None
    while worker is None or worker.is_alive():
        streaming.append([])
        with qtbot.waitSignal(panel.turns.idle, timeout=120_000):
            sent_at = time.perf_counter()
            panel.send(f"Tell me a long story about a cello, a garden and a trip to Lyon ({len(streaming)})")
            sends.append((sent_at, time.perf_counter()))
            if worker is None:
                qtbot.waitUntil(lambda: bool(streaming[-1]), timeout=60_000)  # the reply is streaming
                worker = _consolidate_in_background(services, timings)
    worker.join(60)
    probe.stop()
    assert "error" not in timings, timings.get("error")
    assert timings["job"].state == "done", timings["job"]
    streamed = [(a, b) for a, b in (pair for pair in streaming if len(pair) == 2)]
    overlap = sum(max(0.0, min(b, timings["end"]) - max(a, timings["start"])) for a, b in streamed)
    worst = probe.max_gap_ms(timings["start"] - 0.5, max(timings["end"], streamed[-1][1]), leave_out=sends)
    longest_send = max((b - a) * 1000.0 for a, b in sends)
    print(f"longest GUI stall {worst:.1f} ms, idle baseline {baseline:.1f} ms (ratio {worst / baseline:.1f}) over "
          f"{len(probe.ticks)} ticks; {len(streamed)} replies streamed for {overlap:.2f} s during the "
          f"{timings['end'] - timings['start']:.2f} s consolidation; the longest send() {longest_send:.0f} ms")
    assert overlap > 0.5, "the replies and the consolidation hardly ran at the same time"
    assert worst < max(MAX_STALL_RATIO * baseline, STALL_FLOOR_MS), (worst, baseline)
    panel.shutdown()
    window.runner.shutdown(wait=True)
