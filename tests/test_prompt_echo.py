"""A reply that starts writing out Engram's own fenced notes ends before them (core.prompt_echo): seen with
SmolLM2-135M in a real window, which filled "<<<MEMORIES ... MEMORIES>>" fences with memories that do not exist."""
from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.prompt_echo import ECHO, EchoGuard, stopping_at_echo
from core.protocols import GenerationChunk

ECHOING = ("Family and friends, not your own personal blogs.\nMemorials: <<<MEMORIES [m3] Mina, the owner of a "
           "small farm, is suffering from a rare disease. Memorials>>\nFounder of a charity.")


def chunks_of(text: str, size: int, finish: str = "stop") -> list[GenerationChunk]:
    pieces = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    return [GenerationChunk(p, finish_reason=finish if i == len(pieces) - 1 else None) for i, p in enumerate(pieces)]


class Stream:
    """A model's stream that notes whether it was closed, as the MLX worker's is when its reader leaves."""

    def __init__(self, chunks: list[GenerationChunk]) -> None:
        self.chunks, self.closed = iter(chunks), False

    def __iter__(self):
        return self

    def __next__(self) -> GenerationChunk:
        return next(self.chunks)

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_reply_ends_before_the_fence_however_the_model_splits_its_text(size):
    cancel, stream = threading.Event(), Stream(chunks_of(ECHOING, size))
    out = list(stopping_at_echo(stream, cancel))
    assert "".join(c.text for c in out).rstrip() == "Family and friends, not your own personal blogs.\nMemorials:"
    assert out[-1].finish_reason == ECHO and all(c.finish_reason is None for c in out[:-1])
    assert cancel.is_set() and stream.closed  # generation stops on the model's thread
    assert not any("<" in c.text for c in out)  # no half-written fence was shown on the way


@given(st.text(alphabet="ab<>MEORIS \n", max_size=60), st.integers(1, 9))
def test_a_reply_without_a_fence_comes_through_whole_and_in_order(text, size):
    if any(marker in text for marker in ("<<<MEMORIES", "MEMORIES>>>")):
        return
    out = list(stopping_at_echo(Stream(chunks_of(text, size)), threading.Event()))
    assert "".join(c.text for c in out) == text and out[-1].finish_reason == "stop"


def test_every_fence_of_the_prompt_and_its_closing_form_stop_a_reply():
    for marker in ("<<<CRITICAL_FACTS", "CONFIRMED_PROFILE>>>", "<<<SESSION_STYLE", "MEMORIES>>>"):
        guard = EchoGuard()
        assert guard.feed(f"Sure. {marker} more") == ("Sure.", True)
    assert EchoGuard().feed("cat <<< \"$x\" and a << b >> c") == ("cat <<< \"$x\" and a << b >> c", False)


def test_the_assistant_keeps_and_stores_the_reply_up_to_the_fence(db, embedder):
    from core.assistant import Assistant
    from core.config import Settings
    from core.store.episodes import get_episode
    from core.store.sessions import create_session
    from tests.fakes import ScriptedChatModel
    assistant = Assistant(db, embedder, ScriptedChatModel([ECHOING]), None, Settings())
    session = create_session(db, "echo")
    prepared = assistant.prepare(session, "Where does my sister live?")
    chunks = list(assistant.stream(prepared))
    said = "".join(c.text for c in chunks)
    assert chunks[-1].finish_reason == ECHO and "<<<" not in said
    record = assistant.finish(prepared, said, chunks[-1].finish_reason)
    stored = get_episode(db, record.episode_id)
    assert stored.assistant_text == "Family and friends, not your own personal blogs.\nMemorials:"
    assert stored.metadata["finish_reason"] == ECHO


def test_the_window_shows_the_reply_up_to_the_fence_and_says_why_it_stopped(qtbot, tmp_path, embedder):
    pytest.importorskip("pytestqt")
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _scripted_window, _typed_and_sent
    with _scripted_window(qtbot, tmp_path, ScriptedChatModel([ECHOING]), embedder) as window:
        reply = _typed_and_sent(qtbot, window.show_panel("chat"), "Where does my sister live?")
        assert reply.text == "Family and friends, not your own personal blogs.\nMemorials:"
        assert "writing out its notes" in reply.status.text()


def test_the_terminal_chat_says_why_the_reply_stopped_and_stores_it_trimmed(db, embedder):
    import io

    from app.cli.chat import ChatLoop, MemoryBackend
    from core.assistant import Assistant
    from core.config import Settings
    from core.protocols import SamplingParams
    from tests.fakes import ScriptedChatModel
    assistant = Assistant(db, embedder, ScriptedChatModel([ECHOING]), None, Settings())
    out = io.StringIO()
    ChatLoop(MemoryBackend(assistant, SamplingParams.greedy(64)), io.StringIO("Where does my sister live?\n"),
             out).run()
    # as streamed: the space before the fence was printed already, so the note adds none of its own
    assert "Memorials: [stopped: the model began writing out its notes]" in out.getvalue()
    assert "<<<" not in out.getvalue()
    stored = db.scalar("SELECT assistant_text FROM episodes ORDER BY id DESC LIMIT 1")
    assert stored == "Family and friends, not your own personal blogs.\nMemorials:"
