"""A chat model's token counts are remembered across turns (core.memory.context.CountedTokens): the identity, the
history and the recalled notes are counted again every turn, nearly all of them seen on the turn before."""
from __future__ import annotations

from core.assistant import Assistant
from core.config import Settings
from core.memory.context import CountedTokens
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel


def test_a_text_is_counted_once_while_it_is_among_the_recent_ones():
    asked: list[str] = []
    counts = CountedTokens(lambda text: asked.append(text) or len(text.split()), size=2)
    texts = ["a b", "c", "a b", "d e f", "c", "a b"]
    assert [counts(text) for text in texts] == [2, 1, 2, 3, 1, 2]
    assert asked == ["a b", "c", "d e f", "c", "a b"]  # "c", then "a b", the least recently used when one came


def test_the_second_turn_counts_only_what_is_new_and_a_swapped_model_counts_afresh(db, embedder):
    counted: list[str] = []

    class Counting(ScriptedChatModel):
        def count_tokens(self, text: str) -> int:
            counted.append(text)
            return super().count_tokens(text)

    assistant = Assistant(db, embedder, Counting(["Noted."]), None, Settings())
    session = create_session(db, "counts")
    for message in ("My sister Marta lives in Lisbon.", "Where does Marta live?"):
        prepared = assistant.prepare(session, message)
        assistant.finish(prepared, "".join(c.text for c in assistant.stream(prepared)), "stop")
    first = len(counted)
    assistant.prepare(session, "Where does Marta live?")  # the same message again: only the newest turn is new
    assert counted[first:] == ["Where does Marta live?\nNoted."]
    first = len(counted)
    assistant.chat = Counting(["Noted."])
    assistant.prepare(session, "Where does Marta live?")
    assert len(counted) > first  # another model: its own counts
