"""A reply keeps the earlier conversation turns it quoted (reply_turns, migration 10): which, why recall found
them and whether the reply drew on them — read back with its conversation, gone from it while a turn is in the
trash. The real store and MiniLM embedder; a scripted chat model."""
from __future__ import annotations

from core.assistant import Assistant
from core.config import Settings
from core.memory.conversation import earlier_turns, load_conversation
from core.store.episodes import purge_episode_rows, restore_episode, trash_episode
from core.store.sessions import create_session, trash_session
from core.store.wipe import bring_back, forget_everything
from tests.fakes import ScriptedChatModel

SAID = "My grandmother's name is Philippa and she bakes sourdough every Sunday."


def make(db, embedder, clock, replies) -> Assistant:
    return Assistant(db, embedder, ScriptedChatModel(replies), None, Settings(), clock)


def two_conversations(db, embedder, clock):
    """Philippa's turn in one conversation; in another, a question that recalls it and a reply that uses it."""
    assistant = make(db, embedder, clock, ["How lovely.", "Philippa bakes sourdough every Sunday."])
    before, after = create_session(db, "Family"), create_session(db, "Baking")
    first = assistant.reply(before, SAID)
    later = assistant.reply(after, "What does Philippa bake?")
    return assistant, before, after, first.record.episode_id, later


def test_a_reply_keeps_the_earlier_turns_it_quoted_why_and_whether_it_drew_on_them(db, embedder, clock):
    _, before, after, first, later = two_conversations(db, embedder, clock)
    assert later.prepared.used_episodes == (first,) and later.record.drew_on_turns == (first,)
    (turn,) = load_conversation(db, after).turns
    (earlier,) = turn.earlier
    assert (earlier.episode_id, earlier.session_id, earlier.session_title) == (first, before, "Family")
    assert earlier.user_text == SAID and earlier.drew_on is True
    assert earlier.why == later.prepared.episode_whys[0] and "Philippa" in earlier.why
    assert load_conversation(db, before).turns[0].earlier == ()  # it quoted nothing


def test_a_turn_in_the_trash_leaves_the_row_and_a_hidden_conversation_cannot_be_opened(db, embedder, clock):
    _, before, after, first, _ = two_conversations(db, embedder, clock)
    trash_episode(db, first)
    assert load_conversation(db, after).turns[0].earlier == ()
    restore_episode(db, first)
    assert [e.episode_id for e in load_conversation(db, after).turns[0].earlier] == [first]
    db.execute("UPDATE episodes SET forgotten_at = ? WHERE id = ?", (clock(), first))  # compacted, as forgetting does
    assert load_conversation(db, after).turns[0].earlier[0].forgotten  # still shown: the reply did quote it
    restore_episode(db, first)
    trash_session(db, before)
    (earlier,) = load_conversation(db, after).turns[0].earlier
    assert earlier.session_id is None and earlier.session_title == ""  # still shown; nothing to open
    trash_episode(db, first)
    purge_episode_rows(db, [first])
    assert load_conversation(db, after).turns[0].earlier == ()
    assert db.scalar("SELECT count(*) FROM reply_turns") == 0  # gone with the turn


def test_an_answer_given_again_replaces_what_the_first_one_quoted(db, embedder, clock):
    assistant, _, after, first, later = two_conversations(db, embedder, clock)
    again = assistant.prepare(after, "What does Philippa bake?", dial="off")  # recalls nothing
    assistant.finish(again, "I don't know.", replaces=later.record.episode_id)
    assert load_conversation(db, after).turns[0].earlier == ()
    redo = assistant.prepare(after, "What does Philippa bake?")
    record = assistant.finish(redo, "Something else entirely.", replaces=later.record.episode_id)
    (earlier,) = load_conversation(db, after).turns[0].earlier
    assert earlier.episode_id == first and earlier.drew_on is False and record.drew_on_turns == ()


def test_the_turns_a_reply_being_written_quotes_are_read_in_its_order(db, embedder, clock):
    _, before, _, first, _ = two_conversations(db, embedder, clock)
    other = make(db, embedder, clock, ["Noted."]).reply(before, "I take the tram to work.").record.episode_id
    found = earlier_turns(db, [other, 999_999, first], ["one", "two"])
    assert [(e.episode_id, e.why, e.drew_on) for e in found] == [(other, "one", None), (first, "", None)]
    assert earlier_turns(db, []) == []


def test_forget_everything_takes_them_and_its_undo_brings_them_back(db, embedder, clock, tmp_path):
    *_, after, first, _ = two_conversations(db, embedder, clock)
    wiped = forget_everything(db, tmp_path / "backups")
    assert db.scalar("SELECT count(*) FROM reply_turns") == 0
    bring_back(db, wiped.backup)
    assert [e.episode_id for e in load_conversation(db, after).turns[0].earlier] == [first]


def test_the_terminal_chat_says_which_earlier_turn_a_reply_drew_on(db, embedder, clock):
    import io

    from app.cli.chat import ChatLoop, MemoryBackend
    from core.protocols import SamplingParams
    assistant = make(db, embedder, clock, ["How lovely.", "She bakes sourdough every Sunday."])
    first = assistant.reply(create_session(db, "Family"), SAID).record.episode_id
    out = io.StringIO()
    ChatLoop(MemoryBackend(assistant, SamplingParams.greedy(16)), io.StringIO("What does Philippa bake?\n"),
             out).run()
    assert f"[from earlier conversations: drew on turn {first} “{SAID[:59]}…”" in out.getvalue()
