"""`engram chat` on the real tiny MLX model and the real embedder with scripted stdin: memory-backed turns,
streaming, commands, Ctrl-C, no model."""
from __future__ import annotations

import io

import pytest

from app.cli.main import run_cli
from app.cli.chat import ChatLoop, PlainBackend
from core.protocols import SamplingParams
from core.store.db import open_db
from core.store.episodes import list_episodes
from core.store.sessions import list_sessions


@pytest.fixture
def chat(tmp_path, monkeypatch, capsys, embedder):
    """run(stdin_text, *argv) -> (code, out, err) of `engram chat` on a private data folder."""
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)
    data_dir = tmp_path / "data"

    def run(stdin_text: str, *argv: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin_text))
        capsys.readouterr()
        code = run_cli(["--data-dir", str(data_dir), *argv])
        out, err = capsys.readouterr()
        return code, out, err
    run.data_dir = data_dir
    return run


def test_without_a_model_it_says_how_to_get_one(chat):
    code, out, err = chat("hello\n", "chat")
    assert code == 1
    assert "engram models download" in err
    assert "engram>" not in out


def test_chat_remembers_streams_replies_and_runs_commands(chat, tiny_model_dir):
    assert chat("", "models", "use", str(tiny_model_dir))[0] == 0
    script = "hello there\n\n/incognito\nwhere do I live\n/incognito\n/new\n/help\nthanks\n/quit\nnever read\n"
    code, out, err = chat(script, "chat", "--max-tokens", "12", "--temperature", "0")
    assert code == 0, err
    assert out.count("engram> ") == 3
    assert "Incognito on" in out and "(incognito) you> " in out and "Incognito off" in out
    assert "New conversation." in out and out.count("Commands: /new") == 2  # at the start and for /help
    replies = [line.split("engram> ", 1)[1] for line in out.splitlines() if "engram> " in line]
    assert all(reply.strip() for reply in replies)  # the random tiny model still says something each time
    db = open_db(chat.data_dir / "engram.db")
    try:
        episodes = list_episodes(db, status=None)
        assert sorted(e.user_text for e in episodes) == ["hello there", "thanks"]  # the incognito turn left nothing
        assert len(list_sessions(db)) == 2  # /new opened a second conversation
        assert len({e.session_id for e in episodes}) == 2
        assert all(s.ended_at is not None for s in list_sessions(db))  # /new and /quit end them: ready to reflect
    finally:
        db.close()


def test_end_of_input_leaves_cleanly(chat, tiny_model_dir):
    code, out, _ = chat("hi\n", "chat", "--model", str(tiny_model_dir), "--max-tokens", "4", "--no-memory")
    assert code == 0 and out.count("engram> ") == 1
    assert not (chat.data_dir / "engram.db").exists()  # the model alone: nothing stored


class InterruptingOutput(io.StringIO):
    """Raises KeyboardInterrupt (what Ctrl-C does) while the first reply is being written, once."""

    def __init__(self, after_writes: int) -> None:
        super().__init__()
        self.remaining = after_writes

    def write(self, text: str) -> int:
        if self.remaining is not None and "engram> " in self.getvalue():
            self.remaining -= 1
            if self.remaining == 0:
                self.remaining = None
                raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_stops_the_reply_not_the_chat(tiny_engine):
    backend = PlainBackend(tiny_engine, SamplingParams.greedy(60))
    out = InterruptingOutput(after_writes=4)
    code = ChatLoop(backend, io.StringIO("tell me a story\nand another\n"), out).run()
    assert code == 0
    text = out.getvalue()
    assert " [stopped]" in text
    assert text.count("engram> ") == 2  # the chat went on to the next message
    first_reply = backend.history[1].content
    second_reply = backend.history[3].content
    assert 0 < len(tiny_engine.tokenizer.encode(first_reply)) < 60  # cut short, and what was said is kept
    assert second_reply  # the next reply ran to its end


def test_a_failed_turn_is_reported_and_the_chat_goes_on(tiny_engine):
    backend = PlainBackend(tiny_engine, SamplingParams.greedy(8))
    too_long = "memory " * 5000  # far beyond the tiny model's 2048-token window
    out = io.StringIO()
    code = ChatLoop(backend, io.StringIO(f"{too_long}\nhello\n"), out).run()
    assert code == 0
    assert "context window" in out.getvalue()
    assert out.getvalue().count("engram> ") == 2
    assert [m.content for m in backend.history[::2]] == ["hello"]  # the failed turn left nothing behind


def test_chat_runs_with_the_active_fine_tuned_adapter(chat, tiny_model_dir, tmp_path):
    from core.finetune import adapters as versions
    from models.testing import write_random_adapter
    assert chat("", "models", "use", str(tiny_model_dir))[0] == 0
    folder = write_random_adapter(tiny_model_dir, tmp_path / "adapter", seed=5)
    db = open_db(chat.data_dir / "engram.db")
    try:
        adapter = versions.record_adapter(db, name="adapter 2026-11-23 03:00", base_model=str(tiny_model_dir),
                                          path=str(folder), status="accepted", metrics={}, config={}, sources={})
        versions.activate(db, adapter.id)
    finally:
        db.close()
    code, out, err = chat("hello\n/quit\n", "chat", "--max-tokens", "4", "--temperature", "0")
    assert code == 0, err
    assert "Using your fine-tuned adapter (adapter 2026-11-23 03:00)" in err
    code, out, err = chat("/quit\n", "chat", "--no-memory")
    assert code == 0 and "fine-tuned adapter" not in err  # the model alone: the base weights


def test_a_refused_first_message_leaves_no_conversation_and_bad_utf8_is_named(chat, tiny_model_dir):
    """Issue 13.11: a refused 1 MB message created an empty session; invalid UTF-8 was reported as a bad 'title'."""
    assert chat("", "models", "use", str(tiny_model_dir))[0] == 0
    huge = "x" * (1024 * 1024)
    too_long_for_the_model = "memory " * 5000
    code, out, err = chat(f"{huge}\nbad \udcff bytes\n{too_long_for_the_model}\n/quit\n", "chat", "--max-tokens", "4")
    assert code == 0, err
    assert "too long" in out and "not valid UTF-8" in out and "title" not in out
    assert "context window" in out
    db = open_db(chat.data_dir / "engram.db")
    try:
        assert list_sessions(db, include_deleted=True) == []
    finally:
        db.close()


def test_the_next_reply_does_not_wait_for_learning_and_what_was_learned_is_said(chat, tiny_model_dir, monkeypatch):
    """Issue 17.4: learning runs after the reply, off its path; the next message's reply goes first."""
    import threading

    from models.chat import ChatEngine
    from tests.fakes import ScriptedStructuredModel
    events: list[str] = []
    second_reply = threading.Event()
    real_stream = ChatEngine.stream

    def stream(self, messages, sampling, **kwargs):
        events.append(f"reply {sum(e.startswith('reply') for e in events) + 1}")
        if events[-1] == "reply 2":
            second_reply.set()
        return real_stream(self, messages, sampling, **kwargs)

    def extract(messages, _schema):
        second_reply.wait(timeout=20)  # learning the first turn in the reply's path would wait here in vain
        events.append("extract")
        return {"facts": [{"subject": "user", "relation": "plays", "object": "cello", "confidence": 90,
                           "statement": "User plays the cello", "kind": "semantic", "critical": False,
                           "source": "user_said", "when": ""}] if "cello" in messages[-1].content else []}
    scripted = ScriptedStructuredModel({"engram_facts": extract, "usefulness_rating": [{"useful": []}],
                                        "reconcile_decision": [{"decision": "new", "target": 0, "reason": "new"}]})
    monkeypatch.setattr(ChatEngine, "stream", stream)
    monkeypatch.setattr("models.structured.StructuredGenerator", lambda engine, **_: scripted)
    assert chat("", "models", "use", str(tiny_model_dir))[0] == 0
    code, out, err = chat("I play the cello every evening\nWhat is new?\n", "chat", "--max-tokens", "8")
    assert code == 0, err
    assert events.index("reply 2") < events.index("extract")  # the second reply did not wait for learning
    assert "[from 'I play the cello every evening': learned 1 fact]" in out
    db = open_db(chat.data_dir / "engram.db")
    try:
        assert db.scalar("SELECT statement FROM memories") == "User plays the cello"
        assert db.scalar("SELECT count(*) FROM episodes WHERE json_extract(metadata, '$.learning') = 'pending'") == 0
    finally:
        db.close()
