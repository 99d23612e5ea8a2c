"""Python's cycle collector, run on the GUI thread only.

Left to itself the collector runs in whichever thread happens to allocate when a threshold trips — the db lane,
the MLX thread — and a Qt object in a collected cycle (a closed panel, a dropped dialog) is then destroyed off the
GUI thread. Qt's destructors take the object's mutex and call back into Python for overridden methods, so that
deadlocks against the GUI thread or aborts (CI saw both). Collecting on a GUI timer instead is the usual cure.
"""
from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_MS = 500  # how often the GUI thread looks at the allocation counts


def generation_due(counts: tuple[int, int, int], thresholds: tuple[int, int, int]) -> int | None:
    """The generation the interpreter itself would collect now, or None: CPython's rule (allocations past the first
    threshold start a collection of the oldest generation past its own)."""
    if not thresholds[0] or counts[0] <= thresholds[0]:
        return None
    return max(generation for generation in range(3) if counts[generation] > thresholds[generation])


class GuiThreadCollector(QObject):
    """Turns automatic collection off and collects from a timer on the thread that created it (the GUI thread)."""

    def __init__(self, parent: QObject | None = None, *, interval_ms: int = CHECK_MS) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)
        self._was_enabled = gc.isenabled()

    def start(self) -> "GuiThreadCollector":
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()
        return self

    def stop(self) -> None:
        """Collect what is left, here, and give collection back to the interpreter as it was."""
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()

    def check(self) -> int | None:
        generation = generation_due(gc.get_count(), gc.get_threshold())
        if generation is not None:
            gc.collect(generation)
        return generation
