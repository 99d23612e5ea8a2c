"""What counts as a use: only the context items a reply drew on (core.memory.attribution), through the real turn."""
from __future__ import annotations

from core.assistant import Assistant
from core.config import Settings
from core.memory.attribution import drawn_on
from core.memory.index import index_memories
from core.store.memories import add_memory, get_memories
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel

SISTER = "My sister Ana is learning to play the violin."
FLAT = "My sister Ana moved into a new flat near the river."
BILL = "The electricity bill has to be paid before Friday."


def test_a_reply_that_repeats_an_items_own_word_drew_on_it_and_only_on_it():
    assert drawn_on("What instrument is my sister Ana learning?", "She is learning the violin.",
                    [SISTER, FLAT, BILL]) == [True, False, False]


def test_words_the_user_brought_or_every_item_shares_are_no_evidence():
    # "sister" and "Ana" came with the question; "week" is in both items, and half of neither
    items = ["My sister Ana called about the holidays by the sea this week.",
             "My brother Tom visited with his new dog this week."]
    assert drawn_on("Did my sister Ana call?", "Yes, this week.", items) == [False, False]
    assert drawn_on("Did my sister Ana call?", "Ana is fine.", [SISTER]) == [False]


def test_a_reply_repeating_half_of_an_items_own_words_drew_on_it_even_when_they_are_shared():
    items = ["Paula wants the quarterly report by Monday.", "Raj wants the quarterly report by Monday too."]
    assert drawn_on("What does Paula want?", "The quarterly report, by Monday.", items) == [True, True]


def test_nothing_to_draw_on_and_odd_text():
    assert drawn_on("Hello", "Hi there!", []) == []
    assert drawn_on("", "", ["", "   "]) == [False, False]
    assert drawn_on("你好", "小提琴", ["她在学小提琴"]) == [True]  # unspaced scripts compare character pairs


def _facts(db, embedder, texts):
    ids = [add_memory(db, text) for text in texts]
    index_memories(db, embedder, ids)
    return ids


def test_finish_counts_as_used_only_what_the_reply_drew_on(db, embedder, clock):
    violin, flat, bill = _facts(db, embedder, [SISTER, FLAT, BILL])
    assistant = Assistant(db, embedder, ScriptedChatModel(["Ana is learning the violin."]), None, Settings(), clock)
    reply = assistant.reply(create_session(db, "chat"), "What is my sister Ana learning these days?")
    assert {violin, flat} <= set(reply.used_ids)  # both were in the context: both are chips
    counts = {i: m.access_count for i, m in get_memories(db, [violin, flat, bill]).items()}
    assert counts == {violin: 1, flat: 0, bill: 0}


def test_an_earlier_turn_counts_as_used_when_the_reply_quotes_it(db, embedder, clock):
    chat = ScriptedChatModel(["Noted.", "Noted.", "You said the plumber comes on Thursday."])
    assistant = Assistant(db, embedder, chat, None, Settings(), clock)
    first = assistant.reply(create_session(db, "monday"), "The plumber comes on Thursday at nine.")
    other = assistant.reply(create_session(db, "tuesday"), "I bought a blue umbrella today.")
    later = assistant.reply(create_session(db, "wednesday"), "When does the plumber come?")
    assert first.record.episode_id in later.prepared.used_episodes
    counts = dict(db.execute("SELECT id, access_count FROM episodes WHERE id IN (?, ?)",
                             (first.record.episode_id, other.record.episode_id)).fetchall())
    assert counts == {first.record.episode_id: 1, other.record.episode_id: 0}


def test_the_usefulness_rating_adds_a_use_the_reply_made_in_other_words(db, embedder, clock):
    violin, flat = _facts(db, embedder, [SISTER, FLAT])
    rating = ScriptedStructuredModel({"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": [1, 2]}]})
    assistant = Assistant(db, embedder, ScriptedChatModel(["She plays a string instrument."]), rating,
                          Settings(), clock)
    reply = assistant.reply(create_session(db, "chat"), "What is my sister Ana learning?")
    assert set(reply.used_ids) >= {violin, flat}
    rated = {i: m.access_count for i, m in get_memories(db, [violin, flat]).items()}
    # the rating called both useful and neither's words are in the reply: the reply means the violin (MiniLM cosine
    # 0.62), not the flat (0.21) — a weak model's "everything was useful" is checked like any model output
    assert rated == {violin: 1, flat: 0}
    drew = dict(db.execute("SELECT memory_id, drew_on FROM reply_memories").fetchall())
    assert drew == {violin: 1, flat: 0}


def test_the_command_line_chat_says_what_the_reply_drew_on():
    from types import SimpleNamespace

    from app.cli.chat import memory_note
    used = [SimpleNamespace(id=3, text=FLAT), SimpleNamespace(id=4, text=SISTER)]
    assert memory_note(used, [4]) == f"  [drew on #4 {SISTER} | also recalled #3 {FLAT}]"
    assert memory_note(used, []) == f"  [also recalled #3 {FLAT}; #4 {SISTER}]"
    assert memory_note(used, None) == f"  [used #3 {FLAT}; #4 {SISTER}]"  # incognito: nothing stored, not judged
    assert memory_note([], [1]) == ""


PENICILLIN = "I'm allergic to penicillin."


def test_a_reply_that_fills_the_questions_frame_with_something_else_did_not_draw_on_the_memory(db, embedder, clock):
    # Seen in a real window: SmolLM2 answered "What am I allergic to?" with "I'm allergic to melatonin.", rated the
    # penicillin memory useful, and the chip said "Drew on" — the reply shares only the question's frame with it
    allergy, = _facts(db, embedder, [PENICILLIN])
    rating = ScriptedStructuredModel({"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": [1]}]})
    assistant = Assistant(db, embedder, ScriptedChatModel(["I'm allergic to melatonin."]), rating, Settings(), clock)
    reply = assistant.reply(create_session(db, "chat"), "What am I allergic to?")
    assert allergy in reply.used_ids
    assert dict(db.execute("SELECT memory_id, drew_on FROM reply_memories").fetchall()) == {allergy: 0}


def test_meaning_beyond_the_question_tells_a_paraphrase_from_a_different_answer(embedder):
    from core.memory.attribution import says_in_other_words
    cases = [  # (question, reply, memory, the reply carries the memory)
        ("What am I allergic to?", "I'm allergic to melatonin.", PENICILLIN, False),
        ("What am I allergic to?", "You are allergic to shellfish.", PENICILLIN, False),
        ("Where do I work?", "You work at a bank downtown.", "I work as a nurse at the city hospital.", False),
        ("Where do I work?", "You're a nurse at the hospital in town.", "I work as a nurse at the city hospital.",
         True),
        ("What does my sister do?", "Your sister is a nurse.", SISTER, False),
        ("What does my sister do?", "She plays a string instrument.", SISTER, True),
        ("Any ideas for the weekend?", "You could go to the cinema.", "I love hiking.", False),
        ("Any ideas for the weekend?", "A walk in the hills, since you love the trails?", "I love hiking.", True),
        ("Where do I live?", "You live in Berlin.", "I live in Porto.", False),
    ]
    got = [says_in_other_words(q, r, [m], embedder, Settings().grounding)[0] for q, r, m, _ in cases]
    assert got == [truth for *_, truth in cases]
    assert says_in_other_words("", "", [PENICILLIN], embedder, Settings().grounding) == [False]
    # several at once, in one embedding call: the same answers as one by one
    assert says_in_other_words("Where do I work?", "You're a nurse at the hospital in town.",
                                ["I work as a nurse at the city hospital.", "I love hiking."], embedder,
                                Settings().grounding) == [True, False]


def test_an_everyday_word_in_the_reply_is_no_evidence_even_when_one_item_holds_it():
    """A reply says "work", "time", "today" or "great" whatever it draws on: with a single memory in the context
    (a new user's first hour) every word of it was "distinctive", and a chip said the reply drew on it."""
    nurse, sister = "I work as a nurse in Lisbon.", "My sister Ana visited last week."
    dinner = "How about a quick pasta after a long day at work?"
    assert drawn_on("What should I cook tonight?", dinner, [nurse]) == [False]
    assert drawn_on("What should I cook tonight?", dinner, [nurse, sister]) == [False, False]
    assert drawn_on("Any plans?", "You could take some time for yourself today.",
                    ["I spend time with my family every Sunday."]) == [False]
    assert drawn_on("Any plans?", "A great day to get out!", ["Work has been a great help lately."]) == [False]
    # what the item itself says still counts, alone or with an everyday word beside it
    assert drawn_on("What should I cook tonight?", "Something light after your shifts at the hospital in Lisbon?",
                    [nurse]) == [True]
    assert drawn_on("Any plans?", "Time with your family, as every Sunday?",
                    ["I spend time with my family every Sunday."]) == [True]
    assert drawn_on("Which one?", "Work on the violin today.", [SISTER + " She works hard."]) == [True]


def test_the_cli_names_the_earlier_turns_a_reply_drew_on_and_counts_the_rest():
    from types import SimpleNamespace
    from app.cli.chat import earlier_note
    turn = SimpleNamespace(episode_id=2, user_text="My grandmother Philippa\nbakes sourdough.")
    other = SimpleNamespace(episode_id=5, user_text="I need a new passport.")
    assert earlier_note([turn, other], [2]) == ("  [from earlier conversations: drew on turn 2 “My grandmother "
                                                "Philippa bakes sourdough.”; 1 more quoted]")
    assert earlier_note([turn, other], []) == "  [from earlier conversations: quoted 2, drew on none]"
    assert earlier_note([], [2]) == ""
