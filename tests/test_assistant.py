"""The turn pipeline with scripted models and the real store and embedder."""
from __future__ import annotations

import threading

import pytest

from core.assistant import Assistant
from core.config import Settings
from core.errors import InvalidInput, NotFound, StructuredOutputError
from core.memory.index import index_episodes, index_memories
from core.store import edges, turns
from core.store.episodes import get_episode
from core.store.memories import add_memory, get_memories, get_memory, list_memories
from core.store.sessions import create_session, set_instructions
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel

FACTS = [("The user is allergic to penicillin.", "allergy", "penicillin", True),
         ("The user lives in Boston.", "lives_in", "Boston", False),
         ("The user plays the cello in an orchestra.", "plays", "cello", False),
         ("The user's favourite city for holidays is Lisbon.", "likes", "Lisbon", False)]


def fact_reply(statement: str, obj: str, relation: str) -> dict:
    return {"subject": "user", "relation": relation, "object": obj, "statement": statement, "confidence": 90,
            "kind": "semantic", "critical": False, "source": "user_said", "when": ""}


def all_useful(messages, schema) -> dict:
    return {"useful": list(range(1, schema["properties"]["useful"]["maxItems"] + 1))}


@pytest.fixture(name="store")  # imported as store_fixture where shared
def store_fixture(db, embedder):
    ids = [add_memory(db, s, subject="user", relation=r, object=o, critical=c) for s, r, o, c in FACTS]
    index_memories(db, embedder, ids)
    return dict(zip(("allergy", "boston", "cello", "lisbon"), ids))


def make(db, embedder, clock, structured=None, chat=None, **settings):
    return Assistant(db, embedder, chat or ScriptedChatModel(["Sure, here is my answer."]), structured,
                     Settings().replace(**settings), clock)


def table_counts(db) -> dict[str, int]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                      "'%fts%' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%VIRTUAL%'")]
    return {n: db.scalar(f"SELECT count(*) FROM {n}") for n in names}


def test_a_turn_writes_the_episode_attribution_access_and_learns(db, embedder, clock, store):
    structured = ScriptedStructuredModel({
        "engram_facts": [{"facts": [fact_reply("The user moved to Denver.", "Denver", "lives_in")]}],
        "reconcile_decision": [{"decision": "contradiction", "target": 1, "reason": "moved"}],
        "usefulness_rating": [{"useful": [1, 2]}]})
    assistant = make(db, embedder, clock, structured)
    session = create_session(db, "chat")
    # "for a new job" is left to the model: the patterns read the move (core.memory.unread)
    reply = assistant.reply(session, "I moved to Denver for a new job. Which antibiotic is safe for me?")
    assert reply.text == "Sure, here is my answer." and reply.finish_reason == "stop"
    used = reply.prepared.used
    assert used[0].id == store["allergy"] and used[0].critical and "medication" in used[0].why
    episode = get_episode(db, reply.record.episode_id)
    assert episode.session_id == session and episode.assistant_text == reply.text
    assert turns.used_memory_ids(db, episode.id) == [m.id for m in used] == list(reply.used_ids)
    # "Sure, here is my answer." drew on none of them, in words or in meaning: the rating's "useful" adds no use
    assert all(m.access_count == 0 for m in get_memories(db, reply.used_ids).values())
    learned = reply.learned
    assert learned.indexed and learned.errors == [] and [o.decision for o in learned.outcomes] == ["contradiction"]
    assert not get_memory(db, store["boston"]).is_active
    assert get_memory(db, learned.outcomes[0].memory_id).source_episode_ids == (episode.id,)
    first, second = reply.used_ids[:2]
    # ... nor does it strengthen an edge between them, so no rating is asked for: it could change nothing
    assert learned.useful == [] and edges.get_edge(db, first, second, "hebbian") is None
    assert structured.titles() == ["engram_facts", "reconcile_decision"]
    assert all(r["useful"] is None for r in turns.used_rows(db, episode.id))  # left unrated


def test_incognito_neither_reads_nor_writes_memory(db, embedder, clock, store):
    structured = ScriptedStructuredModel({})
    chat = ScriptedChatModel(["Private answer."])
    assistant = make(db, embedder, clock, structured, chat)
    before = table_counts(db), get_memories(db, list(store.values()))
    reply = assistant.reply(None, "Which antibiotic is safe for me? I live in Boston.", incognito=True)
    assert reply.text == "Private answer." and reply.record.episode_id is None and reply.used_ids == ()
    assert "penicillin" not in chat.calls[0][0].content and reply.learned.skipped == "incognito"
    assert (table_counts(db), get_memories(db, list(store.values()))) == before
    assert structured.calls == []
    followup = assistant.prepare(None, "And for a cold?", incognito=True,
                                 history=[(reply.prepared.user_text, reply.text)])
    assert [m.content for m in followup.messages[1:]] == [reply.prepared.user_text, reply.text, "And for a cold?"]


def test_the_memory_dial_scales_recall_and_off_reads_nothing(db, embedder, clock, store):
    assistant = make(db, embedder, clock)
    counts = {dial: len(assistant.prepare(None, "Tell me about my music, my city and my holidays", dial=dial).used)
              for dial in ("off", "light", "normal", "eager")}
    assert counts["off"] == 0 and 0 < counts["light"] <= counts["normal"] <= counts["eager"]
    off = assistant.prepare(None, "Which antibiotic can I take?", dial="off")
    assert off.used == () and "penicillin" not in off.messages[0].content
    with pytest.raises(InvalidInput):
        assistant.prepare(None, "hello", dial="loud")


def test_a_critical_fact_comes_first_whatever_its_similarity(db, embedder, clock, store):
    noise = [add_memory(db, f"The user once read an article about antibiotic resistance number {i}.")
             for i in range(30)]
    index_memories(db, embedder, noise)
    prepared = make(db, embedder, clock).prepare(None, "Which antibiotic should I ask my doctor for?")
    assert prepared.used[0].id == store["allergy"] and prepared.intents == ("medication",)
    system = prepared.messages[0].content
    assert system.index("CRITICAL_FACTS") < system.index("<<<MEMORIES")


def test_veto_excludes_the_memory_from_a_reanswer_and_weakens_its_edges(db, embedder, clock, store):
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"usefulness_rating": all_useful,
                                                                  "engram_facts": [{"facts": []}]}),
                     chat=ScriptedChatModel(["Not penicillin: you're allergic. Enjoy the orchestra."]))
    reply = assistant.reply(None, "Which antibiotic is safe for a cellist?")
    vetoed, other = store["allergy"], store["cello"]  # the two the reply drew on, so used together
    before = edges.get_edge(db, vetoed, other, "hebbian").weight
    assistant.veto(reply.record.episode_id, vetoed)
    assert edges.get_edge(db, vetoed, other, "hebbian").weight == pytest.approx(before / 2)
    again = assistant.prepare(None, reply.prepared.user_text, exclude=[vetoed])
    assert vetoed not in [m.id for m in again.used]
    record = assistant.finish(again, "A better answer.", "stop", replaces=reply.record.episode_id)
    assert record.episode_id == reply.record.episode_id
    assert get_episode(db, record.episode_id).assistant_text == "A better answer."
    rows = {r["memory_id"]: r for r in turns.used_rows(db, record.episode_id)}
    assert rows[vetoed]["vetoed_at"] == clock.now and db.scalar("SELECT count(*) FROM episodes") == 1
    with pytest.raises(NotFound):
        assistant.veto(record.episode_id, 999_999)


def test_thumbs_are_recorded_and_a_thumbs_up_strengthens_the_replys_memories(db, embedder, clock, store):
    assistant = make(db, embedder, clock)
    reply = assistant.reply(None, "Which antibiotic is safe for a cellist in Boston?")
    episode = reply.record.episode_id
    assistant.rate(episode, 1)
    a, b = reply.used_ids[:2]
    assert get_episode(db, episode).rating == 1 and edges.get_edge(db, a, b, "hebbian").weight > 0
    assistant.rate(episode, None)
    assert get_episode(db, episode).rating is None
    for bad in (2, True, "up"):
        with pytest.raises(InvalidInput):
            assistant.rate(episode, bad)
    with pytest.raises(NotFound):
        assistant.rate(episode + 100, -1)


def test_without_a_structured_model_learning_is_skipped_but_the_turn_is_recallable(db, embedder, clock):
    assistant = make(db, embedder, clock)
    first = assistant.reply(None, "My grandmother's name is Philippa and she bakes sourdough.")
    assert first.learned.skipped == "no structured model" and first.learned.indexed
    later = assistant.prepare(None, "What does Philippa bake?")
    assert "Philippa" in later.messages[0].content and later.used_episodes == (first.record.episode_id,)


def test_a_failing_structured_model_is_reported_not_raised(db, embedder, clock, store):
    def broken(messages, schema):
        raise StructuredOutputError("the model ran out of tokens")
    structured = ScriptedStructuredModel({"engram_facts": broken, "usefulness_rating": broken})
    chat = ScriptedChatModel(["Avoid penicillin: you are allergic to it."])  # draws on a memory: the rating runs
    reply = make(db, embedder, clock, structured, chat).reply(None, "Boston is cold and I need an antibiotic.")
    assert [e.split(":")[0] for e in reply.learned.errors] == ["engram", "rating"]
    assert get_episode(db, reply.record.episode_id).user_text.startswith("Boston is cold")


def test_what_the_person_plainly_said_is_learned_even_when_the_model_fails(db, embedder, clock):
    def broken(messages, schema):
        raise StructuredOutputError("the model ran out of tokens")
    structured = ScriptedStructuredModel({"engram_facts": broken, "usefulness_rating": broken})
    # "grew up by the sea" is no plain pattern's: the model is asked, and fails (core.memory.unread)
    reply = make(db, embedder, clock, structured).reply(None, "Hello! My name is Lina and I grew up by the sea.")
    assert [e.split(":")[0] for e in reply.learned.errors] == ["engram"]  # nothing similar stored: no model asked
    kept = {m.statement: (m.relation, m.object, m.source_episode_ids) for m in list_memories(db)}
    assert kept == {"The user's name is Lina.": ("name", "Lina", (reply.record.episode_id,))}


def test_a_cancelled_reply_is_kept_with_its_reason(db, embedder, clock):
    cancel = threading.Event()
    chat = ScriptedChatModel(["one two three four five"])
    assistant = make(db, embedder, clock, chat=chat)
    seen = []

    def stop_after_two(chunk):
        seen.append(chunk.text)
        if len(seen) == 2:
            cancel.set()
    reply = assistant.reply(None, "Count to five", cancel=cancel, on_chunk=stop_after_two)
    assert reply.finish_reason == "cancelled" and reply.text == "one two "
    assert get_episode(db, reply.record.episode_id).metadata["finish_reason"] == "cancelled"


def test_history_instructions_and_confirmed_profile_reach_the_context(db, embedder, clock):
    chat = ScriptedChatModel(["First answer.", "Second answer."])
    assistant = make(db, embedder, clock, chat=chat)
    session = create_session(db, "chat")
    set_instructions(db, session, "Keep answers under three sentences.")
    db.execute("INSERT INTO hypotheses(dimension, claim, confidence, status, created_at, updated_at) "
               "VALUES ('expertise', 'The user is a nurse.', 0.8, 'confirmed', 0, 0)")
    assistant.reply(session, "Hello there, how are you?")
    prepared = assistant.prepare(session, "And what's new?")
    system = prepared.messages[0].content
    assert "Keep answers under three sentences." in system and "The user is a nurse." in system
    assert [(m.role, m.content) for m in prepared.messages[1:]] == [
        ("user", "Hello there, how are you?"), ("assistant", "First answer."), ("user", "And what's new?")]


def test_bad_input_changes_nothing(db, embedder, clock, store):
    assistant = make(db, embedder, clock)
    before = table_counts(db)
    for text in ("", "   ", "x" * 2_000_000):
        with pytest.raises(InvalidInput):
            assistant.reply(None, text)
    with pytest.raises(NotFound):
        assistant.reply(424242, "hello")
    assert table_counts(db) == before


def test_without_session_instructions_the_confirmed_profile_appears_once(db, embedder, clock):
    db.execute("INSERT INTO hypotheses(dimension, claim, confidence, status, created_at, updated_at) "
               "VALUES ('style', 'The user prefers metric units.', 0.8, 'confirmed', 0, 0)")
    prepared = make(db, embedder, clock).prepare(create_session(db), "How far is a marathon?")
    assert prepared.messages[0].content.count("The user prefers metric units.") == 1


def test_a_recalled_turn_quotes_its_reply_only_when_the_reply_did_not_fail_and_was_not_rated_poor(db, embedder,
                                                                                                   clock):
    """A weak model's looping reply (a real 135M model's, in Portuguese, to an English turn about Lisbon) came back
    as a memory in the next conversation and was copied into its reply: the user's words come back, not the loop."""
    assistant = make(db, embedder, clock, chat=ScriptedChatModel(["unused"]))
    said = {"good": ("My sister Ana lives in Lisbon and loves sardines.", "Lisbon sounds lovely for Ana.", "stop"),
            "loop": ("Ana and I went to the Lisbon aquarium.", "A célula é a célula. A célula é a célula.",
                     "repetition"),
            "poor": ("Ana wants to move from Lisbon to Porto.", "Porto is the capital of Spain.", "stop")}
    turn = {}
    for name, (user_text, reply_text, reason) in said.items():
        turn[name] = assistant.finish(assistant.prepare(None, user_text), reply_text, reason).episode_id
    index_episodes(db, embedder, list(turn.values()))
    assistant.rate(turn["poor"], -1)
    prepared = assistant.prepare(None, "What do you remember about Ana and Lisbon?")
    notes = prepared.messages[0].content
    assert set(turn.values()) <= set(prepared.used_episodes)
    assert all(user_text in notes for user_text, _, _ in said.values())
    assert "Lisbon sounds lovely for Ana." in notes
    assert "célula" not in notes and "capital of Spain" not in notes
    assert turns.unquoted_replies(db, turn.values()) == {turn["loop"]: ("user", said["loop"][0]),
                                                        turn["poor"]: ("user", said["poor"][0])}
    assert turns.unquoted_replies(db, []) == {}


def test_a_plainly_said_fact_the_user_called_wrong_is_not_learned_again(db, embedder, clock):
    from core.memory.manage import MemoryManager
    structured = ScriptedStructuredModel({"engram_facts": [{"facts": []}] * 2, "usefulness_rating": [{"useful": []}]})
    assistant = make(db, embedder, clock, structured)
    first = assistant.reply(None, "I live in Springfield.")
    (memory,) = list_memories(db)
    assert memory.statement == "The user lives in Springfield." and first.learned.outcomes[0].decision == "new"
    MemoryManager(db, embedder).reject(memory.id)
    again = assistant.reply(None, "I live in Springfield.")
    assert again.learned.facts == [] and list_memories(db) == []
