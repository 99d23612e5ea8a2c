"""The MLX worker thread: jobs run on one thread, streams stop when the consumer stops."""
from __future__ import annotations

import threading
import time

import pytest

from core.errors import ModelError
from models.worker import MLXWorker


@pytest.fixture
def worker():
    w = MLXWorker()
    yield w
    w.close()


def test_call_runs_on_the_worker_thread(worker):
    name = worker.call(lambda: threading.current_thread().name)
    assert name == "engram-mlx"
    assert worker.call(lambda: worker.call(lambda: 5)) == 5  # nested call runs inline, no deadlock


def test_call_reraises_errors(worker):
    with pytest.raises(ZeroDivisionError):
        worker.call(lambda: 1 / 0)


def test_stream_yields_items_and_propagates_errors(worker):
    assert list(worker.stream(lambda stop: iter(range(5)))) == [0, 1, 2, 3, 4]

    def failing(stop):
        yield 1
        raise ValueError("boom")

    items = worker.stream(failing)
    assert next(items) == 1
    with pytest.raises(ValueError, match="boom"):
        next(items)


def test_closing_a_stream_stops_the_producer(worker):
    produced = []

    def endless(stop):
        n = 0
        while not stop.is_set():
            produced.append(n)
            yield n
            n += 1

    items = worker.stream(endless)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    count = worker.call(lambda: len(produced))  # runs only after the producer has returned
    time.sleep(0.05)
    assert len(produced) == count


def test_closed_worker_refuses_jobs():
    w = MLXWorker()
    w.close()
    assert not w.alive
    with pytest.raises(ModelError):
        w.submit(lambda: 1)
