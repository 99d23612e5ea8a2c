"""A turn that only asks lends its match to the reply after it (LoCoMo: the reply is what a later query wants).

Real store (FTS5, sqlite-vec) and the real MiniLM embedder.
"""
from __future__ import annotations

from core.memory import scoring
from core.memory.index import index_episodes
from core.memory.recall import recall
from core.store.episodes import add_episode
from core.store.sessions import create_session


def _chat(db, embedder, clock, turns):
    session = create_session(db, "chat")
    ids = []
    for speaker, text, reply in turns:
        clock.advance(60)
        ids.append(add_episode(db, text, reply, speaker=speaker, session_id=session))
    index_episodes(db, embedder, ids)
    return ids


def test_the_reply_to_a_matching_question_outranks_the_question(db, embedder, clock):
    question, reply, _ = _chat(db, embedder, clock, [
        ("Tom", "Which city did you visit in May?", ""), ("Ana", "Porto, it was wonderful", ""),
        ("Tom", "My boss moved the deadline again", "")])
    hits = recall(db, embedder, "Which city did Ana visit in May?", k=2, kinds=("episode",)).hits
    assert [h.id for h in hits] == [reply, question]
    assert f"the reply to matching question #{question}" in hits[0].why
    assert hits[1].breakdown["asks"] == 1.0 and hits[0].breakdown["asks"] == 0.0


def test_an_exchange_with_the_assistant_holds_its_answer_and_is_not_a_bare_question(db, embedder, clock):
    (exchange,) = _chat(db, embedder, clock, [("user", "Which city should I visit in May?", "Porto is lovely then")])
    (hit,) = recall(db, embedder, "city to visit in May", k=1, kinds=("episode",)).hits
    assert hit.id == exchange and hit.breakdown["asks"] == 0.0


def test_a_question_keeps_its_share_and_a_reply_inherits_more_than_a_plain_neighbour():
    weights = scoring.ScoringWeights()
    assert scoring.as_asked(1.0, True, weights) == weights.question_share < 1.0
    assert scoring.as_asked(1.0, False, weights) == 1.0
    assert scoring.neighbour_share(True, weights) == weights.answer_weight > weights.neighbour_weight
    assert scoring.with_context(0.2, 0.5, 0.0, weights, replies=True) > scoring.with_context(0.2, 0.5, 0.0, weights)
