"""A turn's sentences with vectors of their own: how a turn is split, what recall gains, and the rows' life with the
turn's (re-index, purge, forget everything, re-embed, repair, and the older turns given theirs in idle time)."""
from __future__ import annotations

import numpy as np
import pytest

from core.memory import recall_sources
from core.errors import EmbedderMismatch, InvalidInput
from core.memory.index import index_episodes, index_sentence_backlog
from core.memory.manage import MemoryManager
from core.memory.recall import recall
from core.memory.recall_explain import QUOTED_CHARS, quoted
from core.memory.sentences import MAX_SENTENCES, sentence_spans, turn_sentences
from core.store import sentences, vectors
from core.store.db import open_db
from core.store.episodes import add_episode, trash_episode, purge_episode_rows
from core.store.migrations import MIGRATIONS
from core.store.sessions import create_session

BUSY_WEEK = ("What a week. The kids went back to school on Monday and the car needed new tyres. My boss moved the "
             "launch to March, so work has been hectic. On Saturday I finally signed up for a pottery class at the "
             "community centre. Then we had my in-laws over for dinner and I cooked far too much lasagne.")
OTHERS = ("I love making things with my hands, it is relaxing.", "My sister bought a new bicycle for her commute.",
          "We are thinking about repainting the living room green.", "The weather has been awful, rain every day.",
          "I have been reading a lot of science fiction lately.", "Clay is so messy, I never liked it as a kid.")


def _spoken(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def test_a_turn_splits_at_its_sentence_ends_and_line_breaks_and_short_words_join_the_next():
    assert _spoken("Wow! I went to Rome last week. It was great fun. Thanks!") == [
        "Wow! I went to Rome last week.", "It was great fun. Thanks!"]
    assert _spoken("buy milk and eggs\n\n  call the dentist on Monday\nfix the bike") == [
        "buy milk and eggs", "call the dentist on Monday", "fix the bike"]
    assert _spoken("") == [] and _spoken("   \n ") == [] and _spoken("Hi.") == ["Hi."]
    page = " ".join(f"This is sentence number {i}." for i in range(50))
    spans = sentence_spans(page)
    assert len(spans) == MAX_SENTENCES and page[spans[-1][0]:spans[-1][1]].endswith("number 49.")


def test_a_one_sentence_turn_without_a_reply_gets_no_sentence_vectors():
    assert turn_sentences("I like tea with lemon.", "") == []
    assert turn_sentences("I like tea with lemon.", "Noted, tea with lemon.") == [(0, 22)]  # apart from the reply
    assert len(turn_sentences("I like tea with lemon. My car is red.", "")) == 2


@pytest.fixture
def chat(db, embedder):
    session = create_session(db, "a week")
    ids = [add_episode(db, text, session_id=session) for text in (BUSY_WEEK, *OTHERS)]
    index_episodes(db, embedder, ids)
    return ids


def test_a_long_turn_is_as_near_a_question_as_its_nearest_sentence(db, embedder, chat):
    question = embedder.embed(["When is the launch?"])[0]
    whole = vectors.distances(db, "episode", question, [chat[0]])[chat[0]]
    nearest = recall_sources.distances_to(db, "episode", question, [chat[0]])[chat[0]]
    sentence = embedder.embed(['user said, "My boss moved the launch to March, so work has been hectic."'])[0]
    assert nearest == pytest.approx(1 - float(question @ sentence / np.linalg.norm(question) /
                                              np.linalg.norm(sentence)), abs=1e-4)
    assert nearest < whole - 0.2  # the other four sentences no longer average the launch away
    assert list(recall_sources.vector_candidates(db, "episode", question, 3))[0] == chat[0]
    hit = recall(db, embedder, "When is the launch?", k=1, kinds=("episode",)).hits[0]
    assert hit.id == chat[0] and hit.breakdown["similarity"] > 0.3
    assert 'through the sentence "My boss moved the launch to March, so work has been hectic."' in hit.why


def test_a_hit_names_its_sentence_only_when_a_sentence_and_not_the_whole_turn_matched(db, embedder, chat):
    hits = recall(db, embedder, "a new bicycle for my sister's commute", k=3, kinds=("episode",)).hits
    assert hits[0].id == chat[2] and "close in meaning" in hits[0].why
    assert "through the sentence" not in hits[0].why  # one sentence, no reply: the turn itself matched
    long_line = "Our trip " + "went on and on " * 30 + "and ended at the sea."
    cut = quoted(long_line)
    assert cut.endswith("on…") and len(cut) <= QUOTED_CHARS and long_line.startswith(cut[:-1] + " ")
    assert quoted("a\n  b\tc") == "a b c"
    assert quoted(" " * 10_000 + "tail") == "…" and quoted("x" * 500).endswith("…")


def test_without_sentence_vectors_the_same_turn_is_far_from_the_question(db, embedder, monkeypatch):
    """The failing-first check of the test above: one vector a turn, as before schema 9."""
    monkeypatch.setattr("core.memory.index.turn_sentences", lambda user_text, assistant_text: [])
    ids = [add_episode(db, text) for text in (BUSY_WEEK, *OTHERS)]
    index_episodes(db, embedder, ids)
    hit = recall(db, embedder, "When is the launch?", k=1, kinds=("episode",)).hits[0]
    assert hit.breakdown["similarity"] < 0.1


def test_a_trashed_turn_is_not_found_through_its_sentences(db, embedder, chat):
    trash_episode(db, chat[0])
    found = recall(db, embedder, "When is the launch?", k=7, kinds=("episode",))
    assert chat[0] not in found.ids("episode")
    assert chat[0] in recall(db, embedder, "When is the launch?", k=7, kinds=("episode",),
                             include_history=True).ids("episode")


def _sentence_rows(db) -> list[tuple[int, int, int]]:
    return [tuple(r) for r in db.execute("SELECT episode_id, span_start, span_end FROM episode_sentences ORDER BY id")]


def test_indexing_a_turn_again_replaces_its_sentences_and_a_purge_takes_them(db, embedder, chat):
    before = _sentence_rows(db)
    assert [turn for turn, _, _ in before] == [chat[0]] * 5
    index_episodes(db, embedder, [chat[0]])
    assert _sentence_rows(db) == before  # the old rows gave way: the same five, not ten
    trash_episode(db, chat[0])
    purge_episode_rows(db, [chat[0]])
    assert _sentence_rows(db) == []


def test_a_reembed_remakes_every_sentence_vector_with_the_new_model(db, embedder, chat):
    db.execute("UPDATE episode_sentences SET embedding = ?", (np.ones(embedder.dimension, np.float32).tobytes(),))
    assert recall(db, embedder, "When is the launch?", k=1, kinds=("episode",)).hits[0].breakdown["similarity"] < 0.1
    assert MemoryManager(db, embedder).reembed() == 7
    assert recall(db, embedder, "When is the launch?", k=1, kinds=("episode",)).hits[0].breakdown["similarity"] > 0.3


def test_a_sentence_vector_of_the_wrong_size_or_not_finite_is_refused_and_nothing_changes(db, embedder, chat):
    before = _sentence_rows(db)
    for bad in (np.zeros((1, 12), np.float32), np.full((1, embedder.dimension), np.nan, np.float32)):
        with pytest.raises((InvalidInput, EmbedderMismatch)):
            sentences.write(db, {chat[0]: [(0, 12)]}, bad)
    assert _sentence_rows(db) == before


def test_an_import_embeds_the_sentences_before_it_takes_the_write_lock(db, embedder, chat, tmp_path):
    path = tmp_path / "export.json"
    MemoryManager(db, embedder).export_to(path)
    other = open_db(tmp_path / "other.db", clock=db.clock)
    calls: list[int] = []

    class Counting:
        name, dimension = embedder.name, embedder.dimension

        def embed(self, texts):
            calls.append(other.conn.in_transaction)
            return embedder.embed(texts)

    MemoryManager(other, Counting()).import_from(path)
    assert calls and not any(calls)
    assert other.scalar("SELECT count(*) FROM episode_sentences") == 5
    other.close()


def test_a_store_from_before_sentences_gets_them_in_idle_time_newest_first(tmp_path, clock, embedder):
    path = tmp_path / "engram.db"
    older = open_db(path, clock=clock, migrations=MIGRATIONS[:8])
    vectors.bind_embedder(older, embedder.name, embedder.dimension)
    ids = [add_episode(older, f"{BUSY_WEEK} Entry {i}.") for i in range(5)]
    vectors.upsert_vectors(older, "episode", ids, embedder.embed([f"turn {i}" for i in ids]))
    older.close()
    db = open_db(path, clock=clock)
    assert sentences.backfill_below(db) == max(ids) + 1 and _sentence_rows(db) == []
    assert recall(db, embedder, "When is the launch?", k=5, kinds=("episode",)).hits  # recall works meanwhile
    assert index_sentence_backlog(db, embedder, most=2, batch=1) == 2
    assert {turn for turn, _, _ in _sentence_rows(db)} == set(ids[-2:])
    assert index_sentence_backlog(db, embedder) == 3
    assert sentences.backfill_below(db) is None and index_sentence_backlog(db, embedder) == 0
    assert len(_sentence_rows(db)) == 5 * 5  # five sentences each: the four of the busy week and "Entry i."
    db.close()


def test_the_daily_forgetting_job_gives_older_turns_their_sentences_a_step_at_a_time(tmp_path, clock, embedder,
                                                                                     monkeypatch):
    from types import SimpleNamespace

    from app.services.scheduling import forgetting_handler, sentence_backlog
    from core.config import Settings
    from core.memory import index
    from core.scheduler import Environment, JobSpec, Scheduler
    path = tmp_path / "engram.db"
    older = open_db(path, clock=clock, migrations=MIGRATIONS[:8])
    ids = [add_episode(older, f"{BUSY_WEEK} Entry {i}.") for i in range(3)]
    older.close()
    db = open_db(path, clock=clock)
    assert sentence_backlog(db) == 3
    steps: list[int] = []
    real = index.index_sentence_backlog
    monkeypatch.setattr(index, "index_sentence_backlog",
                        lambda *a, **k: steps.append(1) or real(*a, **{**k, "most": 2}))
    handler = forgetting_handler(SimpleNamespace(settings=Settings(), embedder=embedder), db)
    idle = Environment(clock=clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: True)
    scheduler = Scheduler(db, [JobSpec("forgetting", handler)], env=idle)
    job = scheduler.run_job(scheduler.enqueue("forgetting").id)
    assert job.state == "done" and "gave 3 older turns their sentence vectors" in job.message
    assert len(steps) == 2 and sentence_backlog(db) == 0  # two steps of at most two turns each
    assert {turn for turn, _, _ in _sentence_rows(db)} == set(ids)
    db.close()


def test_a_paste_of_the_largest_size_splits_in_one_pass_whatever_its_spaces():
    """A run of spaces with no line break once cost quadratic time (a 200,000-character paste: about a minute)."""
    from core.store.text import MAX_TEXT_CHARS
    hostile = "a" + " " * (MAX_TEXT_CHARS - 2) + "b"
    assert sentence_spans(hostile) == [(0, MAX_TEXT_CHARS)]
    lines = ("word " * 20 + "\n") * (MAX_TEXT_CHARS // 101)
    assert len(sentence_spans(lines)) == MAX_SENTENCES
