"""The terminal chat and a reply the model stopped because it looped: the window replaces the bubble with the reply
said once; a terminal cannot take back what it printed, so it says what was kept. The model-only chat keeps the
trimmed reply in its history too (the loop, sent back to the model, invites another)."""
from __future__ import annotations

import io
import threading
from typing import Iterator

from app.cli.chat import ChatLoop, PlainBackend
from core.protocols import GenerationChunk

LOOPING = "Rome is lovely in spring.\nRome is lovely in spring.\nRome is lovely in spring.\nRome is"


class LoopingEngine:
    def __init__(self) -> None:
        self.prompts: list = []

    def stream(self, messages, sampling, cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        self.prompts.append(list(messages))
        words = LOOPING.split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield GenerationChunk(word + ("" if last else " "), finish_reason="repetition" if last else None)


def test_a_looping_reply_is_followed_by_what_was_kept_and_the_history_holds_that():
    engine = LoopingEngine()
    out = io.StringIO()
    ChatLoop(PlainBackend(engine, sampling=None), io.StringIO("Tell me about Rome\nAnd Paris?\n"), out).run()
    shown = out.getvalue()
    assert "[stopped: the model was repeating itself]\nKept, without the repeats: Rome is lovely in spring.\n" in shown
    earlier_reply = engine.prompts[1][-2]
    assert earlier_reply.role == "assistant" and earlier_reply.content == "Rome is lovely in spring."


class ListEngine:
    """A ChatModel whose stream is a plain iterator, as core.protocols.ChatModel allows (not a generator)."""

    def stream(self, messages, sampling, cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        return iter([GenerationChunk("Lisbon, "), GenerationChunk("mostly.", finish_reason="stop")])


def test_a_stream_that_is_a_plain_iterator_is_shown_whole():
    # found by mypy: the loop closed every stream, and an iterator without close() raised AttributeError
    out = io.StringIO()
    ChatLoop(PlainBackend(ListEngine(), sampling=None), io.StringIO("Where do I live?\n"), out).run()
    assert "Lisbon, mostly." in out.getvalue() and "Error" not in out.getvalue()
