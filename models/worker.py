"""The one long-lived thread that owns all MLX work, fed by a queue (mlx-lm's server does the same).

Loading, generation, adapter changes and unloading all run here, one job at a time, so the model and its
prompt cache are never touched by two threads at once. Callers either wait for a result (`call`) or iterate
a stream of items produced on the worker (`stream`).

It is the process's one MLX owner: MLX does not support use from several threads (ml-explore/mlx#2809; on Metal,
embedding beside generation crashed other apps), so the mlx.nn embedder runs its forward passes here too
(`call_between_steps`). Those short jobs are also run between two items of a running stream, so a query's
embedding waits for one token of a reply, not the whole reply; every other job waits for the stream to end (an
adapter change or an unload must never land mid-reply). tests/test_mlx_owner.py holds it, models/mlx_guard.py
catches an MLX call from any other thread in tests.
"""
from __future__ import annotations

import queue
import sys
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Iterator

from core.errors import ModelError

_STOP = object()
_END = object()


class MLXWorker:
    def __init__(self, name: str = "engram-mlx") -> None:
        self._jobs: deque = deque()  # (future, fn, args, kwargs, between_steps), first in first out
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._parked = threading.Event()
        self._stopped = threading.Event()
        self._thread.start()

    @property
    def alive(self) -> bool:
        return not self._closed and self._thread.is_alive()

    @property
    def on_worker(self) -> bool:
        return threading.current_thread() is self._thread

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        return self._submit(fn, args, kwargs, between_steps=False)

    def submit_between_steps(self, fn: Callable[..., Any], *args: Any) -> Future:
        """`submit` for a short job that may also run between two items of a running stream (an embedding)."""
        return self._submit(fn, args, {}, between_steps=True)

    def call_between_steps(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.on_worker:
            return fn(*args)
        return self.submit_between_steps(fn, *args).result()

    def _submit(self, fn: Callable[..., Any], args: tuple, kwargs: dict, *, between_steps: bool) -> Future:
        if self._closed:
            raise ModelError("The model worker has been shut down.")
        future: Future = Future()
        with self._ready:
            self._jobs.append((future, fn, args, kwargs, between_steps))
            self._ready.notify()
        return future

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn` on the worker and wait for its result (inline when already on the worker)."""
        if self.on_worker:
            return fn(*args, **kwargs)
        return self.submit(fn, *args, **kwargs).result()

    def stream(self, make_items: Callable[[threading.Event], Iterator[Any]]) -> Iterator[Any]:
        """Iterate items produced on the worker by `make_items(stop)`.

        Closing the returned generator early sets `stop`, which the producer checks between items.
        """
        items: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for item in make_items(stop):
                    items.put(item)
                    if stop.is_set():
                        break
                    self.run_short_jobs()
            except BaseException as exc:  # handed to the consumer, raised there
                items.put(_Failure(exc))
            finally:
                items.put(_END)

        self.submit(produce)
        try:
            while True:
                item = items.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            stop.set()

    def close(self, timeout: float = 10.0) -> None:
        if self._closed:
            return
        self._closed = True
        with self._ready:
            self._jobs.append(_STOP)
            self._ready.notify()
        if not self.on_worker:
            self._stopped.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._ready.wait()
                job = self._jobs.popleft()
            if job is _STOP:
                _drain_mlx()
                self._stopped.set()
                self._parked.wait()  # see _drain_mlx: the thread is parked, never ended
                return
            _run_job(*job[:4])

    def run_short_jobs(self) -> None:
        """On the worker, between two steps of a long job (a stream's items, a structured generation's tokens): run
        the short jobs waiting now, in order, leaving every other job queued where it was. Elsewhere nothing."""
        if not self.on_worker:
            return
        with self._ready:
            short = [job for job in self._jobs if job is not _STOP and job[4]]
            for job in short:
                self._jobs.remove(job)
        for job in short:
            _run_job(*job[:4])


def _run_job(future: Future, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as exc:
        future.set_exception(exc)


def _drain_mlx() -> None:
    # MLX 0.32 (mlx[cpu]) can abort the process at exit ("terminate called without an active exception") when
    # a thread that ran generation on mlx-lm's thread-local stream has ended. So a closed worker finishes its
    # pending work and then stays parked (a daemon thread costs nothing at exit) instead of returning.
    mlx_core = sys.modules.get("mlx.core")
    if mlx_core is not None:
        mlx_core.synchronize()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error
