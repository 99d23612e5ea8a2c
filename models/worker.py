"""The one long-lived thread that owns all MLX work, fed by a queue (mlx-lm's server does the same).

Loading, generation, adapter changes and unloading all run here, one job at a time, so the model and its
prompt cache are never touched by two threads at once. Callers either wait for a result (`call`) or iterate
a stream of items produced on the worker (`stream`).
"""
from __future__ import annotations

import queue
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterator

from core.errors import ModelError

_STOP = object()
_END = object()


class MLXWorker:
    def __init__(self, name: str = "engram-mlx") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
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

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        if self._closed:
            raise ModelError("The model worker has been shut down.")
        future: Future = Future()
        self._jobs.put((future, fn, args, kwargs))
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
        self._jobs.put(_STOP)
        if not self.on_worker:
            self._stopped.wait(timeout)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                _drain_mlx()
                self._stopped.set()
                self._parked.wait()  # see _drain_mlx: the thread is parked, never ended
                return
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
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
