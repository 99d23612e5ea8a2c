"""Recall's learnt blend through the real turn pipeline: real store (sqlite-vec, FTS5), real MiniLM embedder, the
real recall, a scripted chat model. A user who removes memories that only share a word with the question teaches
recall to rank such memories lower, for questions it never saw vetoes on; a pin teaches the other way; reset
brings back the preset's ranking exactly."""
from __future__ import annotations

import json

import pytest

from core.assistant import Assistant
from core.config import RecallSettings, Settings
from core.memory import recall_learning
from core.memory.index import index_memories
from core.memory.recall import recall
from core.store import turns
from core.store.memories import add_memory, set_flag
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel

# (question, a memory that answers it in other words, a memory that only shares a word with it)
TOPICS = [
    ("What car do I drive?", "The user commutes in a blue Toyota hatchback.",
     "The user's cat sleeps in the car park shed."),
    ("What is my dog's name?", "The user's puppy is called Biscuit.",
     "The user dislikes the name of the new office building."),
    ("Which instrument do I play?", "The user practises the cello every evening.",
     "The user watched a play at the theatre last week."),
    ("Where do I work?", "The user is employed as a nurse at St Mary's hospital.",
     "The user's washing machine does not work."),
    ("What language am I learning?", "The user studies Japanese on Duolingo every day.",
     "The user thinks learning to drive is stressful."),
    ("Who is my doctor?", "The user's GP is Dr. Patel at the local clinic.",
     "The user's brother is a doctor of philosophy."),
    # held out: never vetoed on
    ("What sport do I like?", "The user goes climbing at the bouldering gym on weekends.",
     "The user does not like mushrooms."),
    ("Where did I go on holiday?", "The user spent two weeks in Crete last summer.",
     "The user has to go to the post office tomorrow."),
    ("What is my favourite food?", "The user loves eating sushi more than anything.",
     "The user's favourite colour is green."),
    ("Where does my sister live?", "The user's sibling Maria has a flat in Lisbon.",
     "The user's favourite album is a live recording."),
]
TRAINED, HELD_OUT = TOPICS[:6], TOPICS[6:]


@pytest.fixture
def pairs(db, embedder):
    ids = {q: (add_memory(db, meaning), add_memory(db, words)) for q, meaning, words in TOPICS}
    index_memories(db, embedder, [i for pair in ids.values() for i in pair])
    return ids


def assistant(db, embedder, clock, **recall_changes):
    settings = Settings().replace(recall=RecallSettings(**recall_changes))
    return Assistant(db, embedder, ScriptedChatModel(["Noted."]), None, settings, clock)


def word_gap(db, embedder, pairs, settings, blend) -> dict[str, float]:
    """For each held-out question: the score of the word-only memory over that of the answering one."""
    gaps = {}
    for question, _, _ in HELD_OUT:
        hits = {h.id: h.score for h in recall(db, embedder, question, k=20, settings=settings, kinds=("memory",),
                                               blend=blend).hits}
        meaning, words = pairs[question]
        gaps[question] = hits[words] / hits[meaning]
    return gaps


def test_vetoes_of_word_only_matches_rank_them_lower_on_new_questions_and_reset_restores(db, embedder, clock,
                                                                                        pairs):
    bot = assistant(db, embedder, clock)
    session = create_session(db, "chat")
    before = word_gap(db, embedder, pairs, bot.settings, None)
    assert all(gap > 1 for gap in before.values())  # the preset ranks each word-only match first
    vetoes = 0
    for _ in range(3):  # the user removes the word-only match whenever a reply brings it
        for question, _, _ in TRAINED:
            reply = bot.reply(session, question)
            clock.advance(600)
            meaning, words = pairs[question]
            if words not in reply.used_ids:
                continue
            stored = json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (reply.record.episode_id,)))
            assert str(words) in stored["recall"]["features"]  # the terms it had, kept with the reply
            bot.veto(reply.record.episode_id, words)
            vetoes += 1
    learnt = recall_learning.load(db)
    assert learnt.vetoes == vetoes >= 10
    meaning_weight, words_weight = learnt.weights[:2]
    assert words_weight < -0.3 and meaning_weight > 0.05
    assert learnt.weights[2:] == pytest.approx((0, 0, 0), abs=0.01)  # links, recency, importance: no contrast
    for question, _, _ in TRAINED:  # the turn's own recall: the word-only match no longer comes first, or at all
        used = [m.id for m in bot.prepare(session, question).used]
        meaning, words = pairs[question]
        assert words not in used or (meaning in used and used.index(meaning) < used.index(words))
    after = word_gap(db, embedder, pairs, bot.settings, recall_learning.effective(db, bot.settings))
    assert all(after[q] < before[q] * 0.7 for q in before)  # each held-out word-only match fell well back
    question = HELD_OUT[0][0]
    hits = {h.id: h for h in recall(db, embedder, question, k=20, settings=bot.settings,  # a turn may share its id
                                    blend=recall_learning.effective(db, bot.settings)).hits if h.kind == "memory"}
    word_hit = hits[pairs[question][1]]
    assert word_hit.breakdown["learnt"] < 0.95 and "learnt from your vetoes, pins and thumbs" in word_hit.why
    flipped = [q for q, gap in after.items() if gap < 1]
    assert flipped  # and for one of them the answer now comes first, in the turn's context too
    for question in flipped:
        used = [m.id for m in bot.prepare(session, question).used]
        meaning, words = pairs[question]
        assert used.index(meaning) < used.index(words)

    recall_learning.reset(db)
    assert recall_learning.effective(db, bot.settings) is None
    assert recall_learning.describe(db, bot.settings).startswith("Nothing learnt yet")
    assert recall_learning.load(db).weights == (0.0,) * len(recall_learning.TERMS)
    assert all(gap > 1 for gap in word_gap(db, embedder, pairs, bot.settings, None).values())  # the preset's order


def test_one_veto_barely_moves_the_ranking(db, embedder, clock, pairs):
    bot = assistant(db, embedder, clock)
    before = word_gap(db, embedder, pairs, bot.settings, None)
    question = TRAINED[0][0]
    reply = bot.reply(create_session(db, "chat"), question)
    bot.veto(reply.record.episode_id, pairs[question][1])
    bot.veto(reply.record.episode_id, pairs[question][1])  # the same veto again teaches nothing more
    assert recall_learning.load(db).vetoes == 1
    after = word_gap(db, embedder, pairs, bot.settings, recall_learning.effective(db, bot.settings))
    assert all(0.9 * before[q] < after[q] < 0.97 * before[q] for q in before)  # ~7%: a nudge, not a flip


def test_a_pin_of_a_memory_a_reply_used_is_learnt_at_the_next_turn(db, embedder, clock, pairs):
    bot = assistant(db, embedder, clock)
    session = create_session(db, "chat")
    question = TRAINED[2][0]
    bot.reply(session, question)
    meaning, _ = pairs[question]
    clock.advance(3600)
    set_flag(db, meaning, "pinned", True, "pinned by hand")
    assert recall_learning.load(db).pins == 0  # seen when the next turn is learnt
    bot.reply(session, "Thanks, that helps.")
    learnt = recall_learning.load(db)
    assert learnt.pins == 1 and learnt.weights[0] > 0  # more meaning, like the memory pinned
    bot.reply(session, "Anything else?")
    assert recall_learning.load(db).pins == 1  # a pin is learnt once
    recall_learning.reset(db)
    bot.reply(session, "One more thing.")
    assert recall_learning.load(db).signals == 0  # pins from before a reset are not learnt again


def test_thumbs_are_mild_once_per_direction_and_never_against_a_shielded_memory(db, embedder, clock, pairs):
    bot = assistant(db, embedder, clock)
    session = create_session(db, "chat")
    question = TRAINED[3][0]
    for memory_id in pairs[question]:
        set_flag(db, memory_id, "protected", True, "by hand")
    reply = bot.reply(session, question)
    episode = reply.record.episode_id
    shielded = set(pairs[question])
    bot.rate(episode, -1)
    bot.rate(episode, -1)
    learnt = recall_learning.load(db)
    assert learnt.rated_down == 1
    taken = json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (episode,)))["recall"]["features"]
    assert set(map(int, taken)) - shielded  # other memories were learnt from, not the protected ones
    bot.rate(episode, 1)
    assert recall_learning.load(db).rated_up == 1
    bot.veto(episode, pairs[question][1])  # a veto of a protected memory is not learnt from
    assert recall_learning.load(db).vetoes == 0
    assert turns.used_rows(db, episode)  # the veto itself still happened
    # whatever was learnt, a protected memory is never ranked lower by it
    harsh = recall_learning.RecallBlend(weights=(-1.0, -1.0, -1.0, -1.0, -1.0), vetoes=1)
    plain = {h.id: h.score for h in recall(db, embedder, question, k=20, settings=bot.settings).hits}
    learnt_hits = {h.id: h.score for h in recall(db, embedder, question, k=20, settings=bot.settings,
                                                 blend=harsh).hits}
    assert all(learnt_hits[i] >= plain[i] for i in shielded)


def test_learning_switched_off_learns_nothing_and_recalls_with_the_preset(db, embedder, clock, pairs):
    bot = assistant(db, embedder, clock, learn=False)
    question = TRAINED[0][0]
    reply = bot.reply(create_session(db, "chat"), question)
    bot.veto(reply.record.episode_id, pairs[question][1])
    bot.rate(reply.record.episode_id, 1)
    assert recall_learning.load(db) == recall_learning.RecallBlend()
    recall_learning.save(db, recall_learning.RecallBlend(weights=(0.5, -0.5, 0.0, 0.0, 0.0), vetoes=3))
    assert recall_learning.effective(db, bot.settings) is None
    assert recall_learning.describe(db, bot.settings).startswith("Learning is off")


def test_forget_everything_forgets_what_recall_learnt_and_bring_back_restores_it(db, embedder):
    from core.memory.manage import MemoryManager
    from core.store import wipe
    manager = MemoryManager(db, embedder)
    manager.add("User lives in Lisbon")
    learnt = recall_learning.RecallBlend(weights=(0.2, -0.4, 0.0, 0.0, 0.0), vetoes=5)
    recall_learning.save(db, learnt)
    result = manager.forget_everything()
    assert recall_learning.load(db) == recall_learning.RecallBlend()  # nothing learnt from what is gone
    wipe.bring_back(db, result.backup)
    assert recall_learning.load(db) == learnt
