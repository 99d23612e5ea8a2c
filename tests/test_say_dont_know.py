"""Issue 40, section 4: when the memory was read and nothing from it reaches the context, the prompt tells the model
so, in Engram's own (system) words, and asks it to say it does not know rather than invent; with notes in the
context, their heading says the same for a question they do not answer. Whether a model obeys is measured by
bench/answers.py (abstention accuracy), not asserted here."""
from __future__ import annotations

from core.assistant import Assistant
from core.config import Settings
from core.memory.context import ContextItem, ContextParts, assemble
from core.memory.index import index_memories
from core.prompts.answer import MEMORY_FENCE, NOTHING_RECALLED
from core.store.memories import add_memory
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel

QUESTION = "What did I name my first dog?"


def _system(parts: ContextParts) -> str:
    built = assemble(parts, lambda text: len(text) // 4 + 1, 4000)
    assert [m.role for m in built.messages][0] == "system"
    return built.messages[0].content


def test_nothing_recalled_is_said_only_when_the_memory_was_read():
    read = _system(ContextParts(QUESTION, "2026-01-01", memory_read=True))
    assert NOTHING_RECALLED in read and "do not know" in NOTHING_RECALLED
    assert NOTHING_RECALLED not in _system(ContextParts(QUESTION, "2026-01-01"))  # dial off / incognito: not asked


def test_with_notes_their_heading_asks_for_i_dont_know_instead_of_the_note():
    note = ContextItem("memory", 7, "The user lives in Boston.", "matched")
    system = _system(ContextParts(QUESTION, "2026-01-01", recalled=[note], memory_read=True))
    assert NOTHING_RECALLED not in system
    heading = system.split(f"<<<{MEMORY_FENCE}")[0]
    assert "do not know" in heading and "instead of guessing" in heading


def test_notes_cut_by_the_budget_count_as_nothing_recalled():
    long_note = ContextItem("memory", 7, "word " * 400, "matched")
    built = assemble(ContextParts(QUESTION, "2026-01-01", recalled=[long_note], memory_read=True),
                     lambda text: len(text) // 4 + 1, 200)
    assert built.left_out and NOTHING_RECALLED in built.messages[0].content


def test_the_assistant_says_so_on_an_empty_store_and_not_when_a_note_matches(db, embedder, clock):
    assistant = Assistant(db, embedder, ScriptedChatModel(["I don't know."]), None, Settings(), clock)
    session = create_session(db, "chat")
    assert NOTHING_RECALLED in assistant.prepare(session, QUESTION).messages[0].content
    assert NOTHING_RECALLED not in assistant.prepare(session, QUESTION, dial="off").messages[0].content
    memory = add_memory(db, "The user's first dog was named Biscuit.", subject="user", relation="had_pet",
                        object="Biscuit")
    index_memories(db, embedder, [memory])
    prepared = assistant.prepare(session, QUESTION)
    assert [m.id for m in prepared.used] == [memory]
    assert NOTHING_RECALLED not in prepared.messages[0].content
    assert NOTHING_RECALLED not in prepared.messages[-1].content  # the user's turn stays the user's words


def test_the_heading_asks_for_i_dont_know_when_the_notes_say_it_of_someone_else():
    """LoCoMo's adversarial questions ask what Caroline realised after "her" charity race, which Melanie ran: the
    notes hold the answer for another person, and every reader of the last round gave it as Caroline's."""
    note = ContextItem("episode", 19, "user: Melanie: I ran a charity race; I realised self-care is important.",
                       "matched", at=0.0)
    heading = _system(ContextParts("What did Caroline realise after her charity race?", "2026-01-01",
                                   recalled=[note], memory_read=True)).split(f"<<<{MEMORY_FENCE}")[0]
    assert "someone they told you about" in heading and "of someone else" in heading and "do not know" in heading
