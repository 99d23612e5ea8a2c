"""A reply that starts writing out Engram's own notes ends there.

Seen in a real window: SmolLM2-135M (what an 8 GB Mac runs) answered "Where does my sister live?" with lines of
"Memorials: <<<MEMORIES [m3] Mina, the owner of a small farm, is suffering from a rare disease. Memorials>>" — the
fence its prompt wraps recalled memories in, filled with memories that do not exist. On screen that reads as what
Engram remembers. A real answer never writes those fences (core.prompts.schema.quote defuses them in anything
quoted), so the reply stops before the first one and keeps what came before it. Text that might begin a fence is
held back until the next piece shows it does not, so no half-written fence reaches the screen either.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Iterator

from core.prompts.answer import FENCES
from core.protocols import GenerationChunk

ECHO = "echo"  # the finish reason of a reply stopped here
MARKERS = tuple(marker for label in FENCES for marker in (f"<<<{label}", f"{label}>>>"))


@dataclass
class EchoGuard:
    held: str = ""  # text that could still be the start of a fence

    def feed(self, text: str) -> tuple[str, bool]:
        """The text safe to show now, and whether a fence was written (the reply ends before it)."""
        text, self.held = self.held + text, ""
        found = [at for at in (text.find(marker) for marker in MARKERS) if at >= 0]
        if found:
            return text[:min(found)].rstrip(), True
        keep = _longest_marker_start(text)
        self.held = text[len(text) - keep:]
        return text[:len(text) - keep], False

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held


def _longest_marker_start(text: str) -> int:
    """The length of the longest end of `text` that a marker begins with."""
    longest = max(len(m) for m in MARKERS)
    for size in range(min(longest - 1, len(text)), 0, -1):
        end = text[-size:]
        if any(marker.startswith(end) for marker in MARKERS):
            return size
    return 0


def stopping_at_echo(chunks: Iterator[GenerationChunk], cancel: threading.Event) -> Iterator[GenerationChunk]:
    """The model's chunks, ended with finish reason ECHO before the first of Engram's fences it writes (`cancel`
    set and the model's stream closed, so generation stops on its thread)."""
    guard = EchoGuard()
    try:
        for chunk in chunks:
            text, echoed = guard.feed(chunk.text)
            if echoed:
                cancel.set()
                yield replace(chunk, text=text, finish_reason=ECHO)
                return
            if chunk.finish_reason is not None:
                text += guard.flush()
            yield replace(chunk, text=text)
        if guard.held:  # a stream that ended without a finishing chunk
            yield GenerationChunk(guard.flush())
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
