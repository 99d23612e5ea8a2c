"""Recall through the real store and the real MiniLM embedder: fusion, context, exclusion, history, reasons."""
from __future__ import annotations

import pytest

from core.config import RecallSettings, Settings
from core.errors import EmbedderMismatch, InvalidInput
from core.memory.index import index_episodes, index_memories
from core.memory.recall import recall
from core.store import vectors
from core.store.edges import set_edge
from core.store.episodes import add_episode, trash_episode
from core.store.memories import add_memory, invalidate_memory, set_flag, trash_memory
from core.store.sessions import create_session

FACTS = ["My sister Ana lives in Lisbon", "I am allergic to peanuts", "The car needs new tyres",
         "I play the violin on Sundays", "My passport number ends in 4471", "Tom prefers green tea"]


@pytest.fixture
def facts(db, embedder):
    ids = [add_memory(db, text) for text in FACTS]
    index_memories(db, embedder, ids)
    return dict(zip(FACTS, ids))


def _memories(result):
    return result.ids("memory")


def test_semantic_and_keyword_matches_are_fused_with_a_breakdown_and_a_reason(db, embedder, facts):
    semantic = recall(db, embedder, "which food makes me ill?", k=3)
    assert semantic.hits[0].id == facts["I am allergic to peanuts"] and semantic.hits[0].kind == "memory"
    assert "close in meaning" in semantic.hits[0].why
    keyword = recall(db, embedder, "passport 4471", k=3).hits[0]
    assert keyword.id == facts["My passport number ends in 4471"]
    assert "'passport'" in keyword.why and "'4471'" in keyword.why
    assert keyword.breakdown["bm25"] > 0 and keyword.breakdown["similarity"] > 0
    assert set(keyword.breakdown) >= {"relevance", "recency", "type_weight", "importance", "confidence", "score"}
    scores = [h.score for h in recall(db, embedder, "tea or violin", k=6).hits]
    assert scores == sorted(scores, reverse=True)


def test_vetoed_invalidated_and_trashed_memories_never_come_back_unless_history(db, embedder, facts):
    peanuts, tyres = facts["I am allergic to peanuts"], facts["The car needs new tyres"]
    assert peanuts not in _memories(recall(db, embedder, "peanut allergy", exclude=[peanuts]))
    invalidate_memory(db, peanuts, reason="outgrew it")
    trash_memory(db, tyres)
    assert peanuts not in _memories(recall(db, embedder, "peanut allergy"))
    assert tyres not in _memories(recall(db, embedder, "car tyres"))
    old = recall(db, embedder, "peanut allergy", include_history=True).hits
    assert old[0].id == peanuts and "no longer holds" in old[0].why
    assert "in the trash" in recall(db, embedder, "car tyres", include_history=True).hits[0].why


def test_forgotten_memories_and_deleted_episodes_stay_out(db, embedder, facts):
    violin = facts["I play the violin on Sundays"]
    db.execute("UPDATE memories SET forgotten_at = 1 WHERE id = ?", (violin,))
    episode = add_episode(db, "I sold my old violin yesterday")
    index_episodes(db, embedder, [episode])
    assert recall(db, embedder, "violin").ids("episode") == [episode]
    trash_episode(db, episode)
    result = recall(db, embedder, "violin")
    assert violin not in _memories(result) and episode not in result.ids("episode")


def test_recall_never_writes_to_the_database(db, embedder, facts):
    before = db.conn.total_changes()
    recall(db, embedder, "where does my sister live?", include_history=True)
    assert db.conn.total_changes() == before


def test_a_strongly_linked_memory_comes_along_with_its_reason(db, embedder, facts):
    ana, tea = facts["My sister Ana lives in Lisbon"], facts["Tom prefers green tea"]
    weak = recall(db, embedder, "Where does Ana live?", k=6)
    set_edge(db, ana, tea, "hebbian", 0.9)
    strong = recall(db, embedder, "Where does Ana live?", k=6)
    boosted = next(h for h in strong.hits if h.id == tea)
    assert f"linked to memory #{ana}" in boosted.why and boosted.breakdown["graph"] > 0
    assert boosted.score > next((h.score for h in weak.hits if h.id == tea), 0.0)
    set_edge(db, ana, tea, "hebbian", 0.1)  # below graph_hop_min_weight: not followed
    assert all(h.breakdown["graph"] == 0 for h in recall(db, embedder, "Where does Ana live?", k=6).hits)


def test_the_answer_turn_after_a_matching_question_is_recalled(db, embedder, clock):
    session = create_session(db, "chat")
    turns = [("Tom", "What did you name your new puppy?"), ("Ana", "We called her Biscuit, she is tiny!"),
             ("Tom", "The weather was awful on the drive home"), ("Ana", "My boss moved the deadline again")]
    ids = []
    for speaker, text in turns:
        clock.advance(60)
        ids.append(add_episode(db, text, speaker=speaker, session_id=session))
    index_episodes(db, embedder, ids)
    hits = recall(db, embedder, "What is the name of Ana's dog?", k=2, kinds=("episode",)).hits
    answer = next(h for h in hits if h.id == ids[1])
    assert answer.breakdown["neighbour"] > 0 and f"the reply to matching question #{ids[0]}" in answer.why
    assert answer.text.startswith("Ana: We called her Biscuit")
    in_prompt = recall(db, embedder, "puppy name", session_id=session, kinds=("episode",))
    assert in_prompt.hits == []  # the conversation's newest turns are already in the prompt


def test_only_the_best_matches_look_up_their_neighbours_and_a_weaker_one_beside_them_still_learns_of_it(
        db, embedder, clock, monkeypatch):
    from core.memory import recall as recall_module
    session = create_session(db, "chat")
    texts = ["What did you name your new puppy?", "We named the puppy Biscuit", "The drive home was long",
             "My boss moved the deadline again"]
    ids = []
    for text in texts:
        clock.advance(60)
        ids.append(add_episode(db, text, speaker="Ana", session_id=session))
    index_episodes(db, embedder, ids)
    monkeypatch.setattr(recall_module, "MIN_LEADERS", 1)
    monkeypatch.setattr(recall_module, "LEADERS_PER_HIT", 0)  # only the best match looks up its neighbours
    hits = recall(db, embedder, "puppy name", k=4, kinds=("episode",)).hits
    leader, weaker = hits[0], next(h for h in hits[1:] if h.id in ids[:2])
    assert {leader.id, weaker.id} == set(ids[:2])  # the two puppy turns, side by side
    assert leader.breakdown["neighbour"] > 0  # its own lookup found the other puppy turn
    assert weaker.breakdown["neighbour"] > 0 and f"next to matching turn #{leader.id}" in weaker.why


def test_importance_and_confidence_change_the_order_of_equal_matches(db, embedder):
    sure = add_memory(db, "Ana likes jazz", confidence=1.0, importance=1.0)
    unsure = add_memory(db, "Ana likes jazz music", confidence=0.2)
    index_memories(db, embedder, [sure, unsure])
    assert _memories(recall(db, embedder, "jazz")) == [sure, unsure]


def test_presets_are_named_in_settings_and_unknown_ones_are_refused(db, embedder, facts, clock):
    old = add_memory(db, "Ana moved to Porto", created_at=clock.now - 400 * 86400)
    index_memories(db, embedder, [old])
    archive = Settings(recall=RecallSettings(preset="archive"))
    hit = next(h for h in recall(db, embedder, "Ana Porto", settings=archive).hits if h.id == old)
    assert hit.breakdown["recency"] == 0.0
    with pytest.raises(InvalidInput, match="unknown recall preset"):
        recall(db, embedder, "Ana", settings=Settings(recall=RecallSettings(preset="psychic")))


@pytest.mark.parametrize("query", ["", "   ", "a\x00b", "x" * 5000, b"\xff\xfe"])
def test_bad_queries_are_refused(db, embedder, facts, query):
    with pytest.raises(InvalidInput):
        recall(db, embedder, query)


@pytest.mark.parametrize("options", [{"k": 0}, {"k": True}, {"k": "3"}, {"kinds": ("facts",)}, {"kinds": ()},
                                     {"exclude": ["x"]}])
def test_bad_options_are_refused(db, embedder, facts, options):
    with pytest.raises(InvalidInput):
        recall(db, embedder, "Ana", **options)


def test_fts_syntax_in_a_query_is_plain_text(db, embedder, facts):
    hits = recall(db, embedder, 'tyres" OR NEAR(car*) ^ AND:', k=2).hits
    assert hits[0].id == facts["The car needs new tyres"]


def test_a_store_bound_to_another_embedder_is_refused_and_an_unbound_one_uses_words(db, embedder, tmp_path):
    memory = add_memory(db, "Ana plays the oboe")
    assert recall(db, embedder, "oboe").ids("memory") == [memory]  # no vectors yet: full text only
    vectors.bind_embedder(db, "another-model", embedder.dimension)
    with pytest.raises(EmbedderMismatch):
        recall(db, embedder, "oboe")


def test_pinned_flag_does_not_resurrect_a_trashed_memory(db, embedder, facts):
    tea = facts["Tom prefers green tea"]
    set_flag(db, tea, "pinned", True)
    trash_memory(db, tea)
    assert tea not in _memories(recall(db, embedder, "green tea"))


def test_a_turn_by_the_person_the_query_names_ranks_first(db, embedder):
    session = create_session(db, "chat")
    tom = add_episode(db, "I went hiking in the Alps last weekend", speaker="Tom", session_id=session)
    ana = add_episode(db, "I went hiking in the Alps last weekend", speaker="Ana", session_id=session)
    index_episodes(db, embedder, [tom, ana])
    hits = recall(db, embedder, "Where did Ana go hiking?", kinds=("episode",)).hits
    assert hits[0].id == ana and hits[0].breakdown["speaker"] > 0 and "said by Ana" in hits[0].why
    assert hits[1].breakdown["speaker"] == 0


def test_bm25_uses_the_rarest_words_within_its_budget_and_drops_words_in_too_many_rows(db, embedder, monkeypatch):
    from core.memory import recall_sources
    ids = [add_memory(db, f"Walked the dog in the park on day {n}") for n in range(30)]
    ids.append(add_memory(db, "The dog ate my saxophone reed"))
    index_memories(db, embedder, ids)
    assert recall_sources.affordable_terms(db, "memories_fts", ["dog", "saxophone", "walked"], budget=40) == \
        ["saxophone", "walked"]  # rarest first: 1 + 30 rows fit in 40; 'dog' (31 more) does not
    assert recall_sources.affordable_terms(db, "memories_fts", ["dog", "park"], budget=10) == []
    monkeypatch.setattr(recall_sources, "BM25_BUDGET", 10)
    hit = recall(db, embedder, "dog saxophone", k=1).hits[0]
    assert hit.id == ids[-1] and hit.breakdown["bm25"] > 0 and "'saxophone'" in hit.why
    assert recall(db, embedder, "walked dog park", k=5).hits  # too common for BM25: meaning still finds them


def test_a_question_that_names_a_time_favours_what_was_said_then(db, embedder):
    from datetime import datetime, timezone
    march = datetime(2023, 3, 14, tzinfo=timezone.utc).timestamp()
    july = datetime(2023, 7, 2, tzinfo=timezone.utc).timestamp()
    now = datetime(2023, 11, 1, tzinfo=timezone.utc).timestamp()
    summer = add_episode(db, "I baked a lemon cake for the party", speaker="Ana", created_at=july)
    spring = add_episode(db, "I baked a lemon cake for the party", speaker="Ana", created_at=march)
    index_episodes(db, embedder, [summer, spring])
    hits = recall(db, embedder, "What cake did Ana bake in March?", kinds=("episode",), now=now).hits
    assert hits[0].id == spring and hits[0].breakdown["time"] > 0
    assert "from the time the query names ('in march')" in hits[0].why
    assert hits[1].breakdown["time"] == 0
    plain = recall(db, embedder, "What cake did Ana bake?", kinds=("episode",), now=now).hits
    assert all(h.breakdown["time"] == 0 for h in plain)  # no time named, no window



def test_a_store_whose_nearest_rows_were_forgotten_still_recalls_what_is_left(db, embedder):
    """Forgetting archives most of a long-used store; the rows nearest a question may all be archived. Recall
    asks its retrievers deeper until the rows it may return fill its pool: the one active memory is found."""
    archived = [add_memory(db, f"My morning green tea habit, note {i}") for i in range(80)]
    kept = add_memory(db, "Each day starts with a cup of sencha")
    index_memories(db, embedder, [*archived, kept])
    db.conn.executemany("UPDATE memories SET forgotten_at = 1 WHERE id = ?", [(i,) for i in archived])
    settings = Settings(recall=RecallSettings(candidates=20))
    result = recall(db, embedder, "green tea habit in the morning", k=3, settings=settings, kinds=("memory",))
    assert result.ids("memory") == [kept]
    assert recall(db, embedder, "green tea habit in the morning", k=3, settings=settings,
                  include_history=True).ids("memory")[0] in archived


def test_one_vector_search_passes_over_archived_rows_once_the_partitions_are_packed(db, embedder, monkeypatch):
    """Packed partitions let the vector search skip rows recall may not return before rescoring any, so a store
    mostly archived costs one search, not a second one after the first came back full of archived rows."""
    from core.memory import recall_sources
    archived = [add_memory(db, f"My morning green tea habit, note {i}") for i in range(80)]
    kept = add_memory(db, "Each day starts with a cup of sencha")
    index_memories(db, embedder, [*archived, kept])
    db.conn.executemany("UPDATE memories SET forgotten_at = 1 WHERE id = ?", [(i,) for i in archived])
    assert vectors.upkeep(db).packed > 0
    searches = []
    real = recall_sources.vector_candidates
    monkeypatch.setattr(recall_sources, "vector_candidates",
                        lambda *args, **kwargs: searches.append(args[3]) or real(*args, **kwargs))
    settings = Settings(recall=RecallSettings(candidates=20))
    assert recall(db, embedder, "green tea habit in the morning", k=3, settings=settings,
                  kinds=("memory",)).ids("memory") == [kept]
    assert searches == [20]  # one search, at the pool's depth
