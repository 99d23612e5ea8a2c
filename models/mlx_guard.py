"""A test-time check that MLX is used from its owner thread only (models/worker.py says why it must be).

Opt-in, never on in the app: while a `MLXThreadGuard` is entered, every function of mlx.core and of its fast,
random and linalg modules, and the array methods that read a result (item, tolist, astype), first check the thread
calling them. A call from any other thread is recorded and raises MLXThreadError: the record survives a caller that
swallows the error, so a test asserts `guard.violations == []` at the end. mlx.nn's layers call mlx.core's
functions through the module (`mx.addmm`, `mx.fast...`), so a forward pass on the wrong thread is caught at its
first layer.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

_MODULES = ("", "fast", "random", "linalg")
_ARRAY_METHODS = ("item", "tolist", "astype")


class MLXThreadError(AssertionError):
    """MLX was called from a thread that does not own it."""


@dataclass
class MLXThreadGuard:
    owners: tuple[threading.Thread, ...] = ()
    allowed: Callable[[threading.Thread], bool] | None = None  # or: which threads may (the Mac-shaped lane's)
    violations: list[str] = field(default_factory=list)
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __enter__(self) -> "MLXThreadGuard":
        import mlx.core as mx
        for name in _MODULES:
            module = getattr(mx, name) if name else mx
            for attribute in dir(module):
                value = getattr(module, attribute)
                if not attribute.startswith("_") and callable(value) and not isinstance(value, type):
                    self._wrap(module, attribute, value)
        for attribute in _ARRAY_METHODS:
            self._wrap(mx.array, attribute, getattr(mx.array, attribute))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, attribute, original in reversed(self._saved):
            setattr(owner, attribute, original)
        self._saved.clear()

    def _wrap(self, owner: Any, attribute: str, original: Callable) -> None:
        where = f"{getattr(owner, '__name__', owner)}.{attribute}"

        @functools.wraps(original)
        def checked(*args: Any, **kwargs: Any) -> Any:
            thread = threading.current_thread()
            if thread not in self.owners and not (self.allowed is not None and self.allowed(thread)):
                message = f"{where} called on thread {thread.name!r}, not on the MLX owner"
                with self._lock:
                    self.violations.append(message)
                raise MLXThreadError(message)
            return original(*args, **kwargs)

        self._saved.append((owner, attribute, original))
        setattr(owner, attribute, checked)
