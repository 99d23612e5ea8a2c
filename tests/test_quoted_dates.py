"""A recalled turn is quoted with the day it was said, and its relative date words with the dates they named then
(core.memory.quoted_dates): "yesterday" in a turn from 8 May 2023 meant 7 May 2023, whatever today is."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from core.assistant import Assistant
from core.config import Settings
from core.memory.context import ContextItem
from core.memory.index import index_episodes
from core.memory.quoted_dates import dated_text, meant_date, said_day
from core.store.episodes import add_episode
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel

MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()  # 8 May 2023 was a Monday


@pytest.mark.parametrize("phrase, meant", [
    ("yesterday", "7 May 2023"), ("the day before yesterday", "6 May 2023"), ("tomorrow", "9 May 2023"),
    ("last Friday", "5 May 2023"), ("3 days ago", "5 May 2023"), ("in 2 days", "10 May 2023"),
    ("last week", "the week before 8 May 2023"), ("two weeks ago", "two weeks before 8 May 2023"),
    ("next week", "the week after 8 May 2023"), ("last weekend", "the weekend before 8 May 2023"),
    ("in 2 weeks", "2 weeks after 8 May 2023"), ("this week", "the week of 8 May 2023"),
    ("last month", "April 2023"), ("a few months ago", "February 2023"), ("next month", "June 2023"),
    ("last year", "2022"), ("two years ago", "2021"), ("this year", "2023"), ("in a year", "2024"),
    ("a month ago", "April 2023"), ("last month", "April 2023"),
    ("last night", "7 May 2023"), ("tonight", "8 May 2023"), ("this morning", "8 May 2023"),
    ("last fri", "5 May 2023"), ("last Tues", "2 May 2023"), ("two weekends ago", "two weekends before 8 May 2023"),
    ("last summer", "summer 2022"), ("this summer", "summer 2023"), ("next summer", "summer 2023"),
    ("last winter", "winter 2022–2023"), ("next winter", "winter 2023–2024"), ("last spring", "spring 2022")])
def test_each_phrase_means_a_date_as_precise_as_its_words(phrase, meant):
    assert meant_date(phrase, MONDAY) == meant


def test_a_season_is_the_one_the_words_meant_on_the_day_they_were_said():
    october, january = (datetime(2023, 10, 20, tzinfo=timezone.utc).timestamp(),
                        datetime(2024, 1, 20, tzinfo=timezone.utc).timestamp())
    assert meant_date("last summer", october) == "summer 2023"  # the one just over
    assert meant_date("this summer", october) == "summer 2023" and meant_date("next summer", october) == "summer 2024"
    assert meant_date("last winter", january) == "winter 2022–2023"  # this one is not over yet
    assert meant_date("this winter", january) == "winter 2023–2024"


def test_a_turn_keeps_its_words_and_gains_the_dates():
    said = "I went to a support group yesterday. I painted that lake sunrise last year!"
    assert dated_text(said, MONDAY) == ("I went to a support group yesterday (7 May 2023). "
                                        "I painted that lake sunrise last year (2022)!")
    assert dated_text("I may go in May. Nothing else.", MONDAY) == "I may go in May. Nothing else."
    month_end = datetime(2024, 1, 31, tzinfo=timezone.utc).timestamp()
    assert dated_text("We moved last month.", month_end) == "We moved last month (December 2023)."


def test_a_quoted_turn_stands_under_its_day_and_an_undated_one_is_unchanged():
    assert said_day(MONDAY) == "8 May 2023"
    dated = ContextItem("episode", 9, "user: I adopted Toby yesterday", "matched", at=MONDAY)
    assert dated.line() == "[e9] user: I adopted Toby yesterday (7 May 2023)" and dated.day() == "8 May 2023"
    assert ContextItem("episode", 9, "user: hi", "matched").line() == "[e9] user: hi"
    assert ContextItem("memory", 3, "The user adopted Toby yesterday.", "m").line() == \
        "[m3] The user adopted Toby yesterday."  # a fact's own date is its own (core.memory.engram)


def test_the_assistant_quotes_a_recalled_turn_with_its_day(db, embedder, clock):
    session = create_session(db, "earlier")
    episode = add_episode(db, "I adopted a puppy called Toby yesterday.", "Congratulations!", session_id=session,
                          created_at=MONDAY)
    index_episodes(db, embedder, [episode])
    clock.now = MONDAY + 200 * 86400
    assistant = Assistant(db, embedder, ScriptedChatModel(["ok"]), None, Settings(), clock)
    prepared = assistant.prepare(create_session(db, "now"), "When did I adopt Toby?")
    system = prepared.messages[0].content
    assert (f"Said on 8 May 2023:\n[e{episode}] user: I adopted a puppy called Toby yesterday (7 May 2023)."
            in system)


def test_turns_of_one_day_share_its_heading_and_the_notes_end_asking_for_an_answer():
    """The day stands on its own line, once for neighbours of the same day: quoted in each turn's tag, greedy
    SmolLM2 copied the whole block instead of answering (tests/integration/test_real_model.py)."""
    from core.memory.context import ContextParts, assemble, note_lines
    from core.prompts.answer import MEMORY_CLOSING
    later = MONDAY + 12 * 86400
    items = [ContextItem("episode", 1, "user: I adopted Toby yesterday", "m", at=MONDAY),
             ContextItem("episode", 2, "user: Toby chewed my shoe", "m", at=MONDAY + 60),
             ContextItem("memory", 7, "The user has a dog called Toby.", "m"),
             ContextItem("episode", 3, "user: Toby is at the vet", "m", at=later),
             ContextItem("episode", 4, "user: the vet said he is fine", "m", at=MONDAY)]
    assert note_lines(items) == ["Said on 8 May 2023:", "[e1] user: I adopted Toby yesterday (7 May 2023)",
                                 "[e2] user: Toby chewed my shoe", "[m7] The user has a dog called Toby.",
                                 "Said on 20 May 2023:", "[e3] user: Toby is at the vet",
                                 "Said on 8 May 2023:", "[e4] user: the vet said he is fine"]
    built = assemble(ContextParts("Where is Toby?", "2023-05-21", recalled=items), lambda t: len(t.split()), 10_000)
    system = built.messages[0].content
    assert system.endswith("MEMORIES>>>\n" + MEMORY_CLOSING) and "said 8 May" not in system
    tight = assemble(ContextParts("Where is Toby?", "2023-05-21", recalled=items), lambda t: len(t.split()),
                     built.tokens - 1)
    assert tight.tokens <= built.tokens - 1  # a heading is counted in the budget with its turn
