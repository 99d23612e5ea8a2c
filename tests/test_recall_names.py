"""A name in the question says who spoke, not what was said; and a deep recall looks deeper in each retriever.

Real store (FTS5, sqlite-vec) and, where meaning matters, the real MiniLM embedder.
"""
from __future__ import annotations

from core.config import Settings
from core.memory import recall as recall_module
from core.memory import recall_sources
from core.memory.query import analyse
from core.memory.recall import recall
from core.store.episodes import add_episode
from core.store.memories import add_memory
from core.store.sessions import create_session


def _chat(db, turns):
    session = create_session(db, "chat")
    return [add_episode(db, text, speaker=speaker, session_id=session) for speaker, text in turns]


def test_speaker_terms_are_the_query_words_that_name_someone_who_spoke(db):
    _chat(db, [("Ana Lopez", "I moved to Lisbon in spring"), ("Tom", "Lisbon is lovely, Ana")])
    assert recall_sources.speaker_terms(db, ("ana", "lisbon", "tom", "lopez", "spring")) == {"ana", "tom", "lopez"}
    assert recall_sources.speaker_terms(db, ()) == set()
    assert recall_sources.speaker_terms(db, ('"speaker', "ana OR")) == set()  # quoted: never FTS syntax


def test_turn_search_drops_speaker_names_but_keeps_them_for_memories_and_when_nothing_else_is_left(db):
    _chat(db, [("Ana", "I adopted a puppy")])
    assert recall_module._topic_terms(db, "episode", analyse("What did Ana adopt?")) == ("adopt",)
    assert recall_module._topic_terms(db, "memory", analyse("What did Ana adopt?")) == ("ana", "adopt")
    assert recall_module._topic_terms(db, "episode", analyse("Ana?")) == ("ana",)


def test_turns_that_only_address_the_named_person_are_not_recalled_for_her_words(db, embedder):
    """With no vectors (full text only) the name alone used to match Tom's turn that thanks Ana, thrice."""
    ana, tom = _chat(db, [("Ana", "I adopted a puppy from the shelter"), ("Tom", "Ana! Ana, you are the best, Ana")])
    hits = recall(db, embedder, "What did Ana adopt?", kinds=("episode",)).hits
    assert [h.id for h in hits] == [ana, tom]
    assert hits[0].breakdown["speaker"] > 0 and "'adopt'" in hits[0].why
    assert hits[1].breakdown["bm25"] == 0 and hits[1].why.startswith(f"next to matching turn #{ana}")  # only beside


def test_a_deep_recall_asks_each_retriever_for_more_rows_than_it_returns(db, embedder, monkeypatch):
    ids = [add_memory(db, f"Note {n} about the garden shed") for n in range(5)]
    asked = []
    real = recall_sources.bm25_candidates
    monkeypatch.setattr(recall_sources, "bm25_candidates", lambda db, kind, terms, limit: asked.append(limit)
                        or real(db, kind, terms, limit))
    assert set(recall(db, embedder, "garden shed", k=100, kinds=("memory",)).ids("memory")) == set(ids)
    assert asked == [recall_module.POOL_PER_HIT * 100 * recall_module.TEXT_SHARE]
    recall(db, embedder, "garden shed", k=5, kinds=("memory",))
    assert asked[-1] == Settings().recall.candidates * recall_module.TEXT_SHARE  # a usual k keeps the settings' pool


def test_full_text_candidates_are_fts5s_own_bm25_ranking_with_ties_broken_by_id(db):
    """bm25() is ordered on directly (cheaper than `rank MATCH`): the same rows and scores as FTS5's rank."""
    _chat(db, [("Ana", "the garden shed"), ("Tom", "garden"), ("Ana", "a shed in the garden by the shed"),
               ("Tom", "garden shed"), ("Ana", "garden shed")] + [("Ana", f"note {n} on the garden") for n in range(8)])
    found = recall_sources.bm25_candidates(db, "episode", ("garden", "shed"), 6)
    weights = recall_sources.BM25_WEIGHTS["episode"]
    ranked = db.execute("SELECT rowid, rank FROM episodes_fts WHERE episodes_fts MATCH ? AND rank MATCH ? "
                        "ORDER BY rank, rowid", ('"garden" OR "shed"', f"bm25({weights})")).fetchall()
    assert list(found.items()) == [(int(i), float(s)) for i, s in ranked[:6]]
    assert len({s for s in found.values()}) < len(found)  # a tie was among them, broken by id
