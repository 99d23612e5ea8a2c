"""A long recalled turn is quoted around the sentence recall matched in it (core.memory.excerpt), so a small window
holds several notes instead of one whole turn (BEAM's ~500-word turns: two of eight recalled fit 2,048 tokens)."""
from __future__ import annotations

from core.memory.context import ContextItem, ContextParts, assemble
from core.memory.excerpt import around

FILLER = " ".join(f"word{i}" for i in range(300))
TURN = f"user: {FILLER} After caching, the dashboard API averages 250ms. {FILLER}"


def test_a_long_turn_is_cut_around_its_matched_sentence_keeping_who_said_it():
    cut = around(TURN, "After caching, the dashboard API averages 250ms.", 40)
    assert cut.startswith("user: … ") and cut.endswith(" …")
    assert "After caching, the dashboard API averages 250ms." in cut
    assert len(cut.split()) <= 40 + 3  # the label and the two marks
    assert cut.index("word29") < cut.index("After caching")  # a little of what came before, for context


def test_a_short_turn_or_an_unknown_sentence_is_left_whole():
    assert around("user: I adopted Toby.", "I adopted Toby.", 40) == "user: I adopted Toby."
    assert around(TURN, "a sentence the turn does not hold", 40) == TURN


def test_the_window_holds_several_long_turns_instead_of_one():
    def words(text: str) -> int:
        return len(text.split())
    turns = [ContextItem("episode", i, TURN.replace("250ms", f"{i}ms"), "why", at=float(i),
                         sentence=f"After caching, the dashboard API averages {i}ms.") for i in range(1, 5)]
    whole = [ContextItem(t.kind, t.id, t.text, t.why, at=t.at) for t in turns]  # no sentence: as before
    budget = 900
    assert len(assemble(ContextParts("How fast is the API?", "2024-04-26", recalled=whole), words,
                        budget).included) == 1
    built = assemble(ContextParts("How fast is the API?", "2024-04-26", recalled=turns), words, budget)
    assert [i.id for i in built.included] == [1, 2, 3, 4] and built.tokens <= budget
    system = built.messages[0].content
    assert all(f"averages {i}ms" in system for i in range(1, 5))
    roomy = assemble(ContextParts("How fast is the API?", "2024-04-26", recalled=turns), words, 100_000)
    assert roomy.included[0].text == turns[0].text  # a window with room quotes each turn whole


def test_a_prompt_filled_with_excerpts_stays_inside_its_budget_as_written():
    """Seen on BEAM with Qwen2.5-0.5B: excerpts filled the window to the last token by the pieces' counts, and the
    prompt as written (headings, fences, closing line, joins) came to 1,916 tokens for 1,888: the engine refused it,
    "shorten the message". The messages as written are counted again and the notes cut until they fit."""
    from core.memory.context import written_tokens

    def words(text: str) -> int:
        return len(text.split())
    turns = [ContextItem("episode", i, TURN.replace("250ms", f"{i}ms"), "why", at=float(i) * 86400,
                         sentence=f"After caching, the dashboard API averages {i}ms.") for i in range(1, 9)]
    for budget in (300, 600, 900, 1888):
        built = assemble(ContextParts("How fast is the dashboard API now?", "2024-04-26", recalled=turns,
                                      memory_read=True), words, budget)
        assert written_tokens(built.messages, words) <= budget and built.included


def test_a_prompt_far_inside_its_budget_is_not_counted_again_as_written():
    """The whole system prompt is counted anew only near the budget (the joins are a few tokens in thousands)."""
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())
    turns = [ContextItem("episode", i, f"The API averages {i}ms now.", "why", at=float(i) * 86400) for i in range(1, 4)]
    built = assemble(ContextParts("How fast is the API?", "2024-04-26", recalled=turns, memory_read=True), words,
                     10_000)
    assert len(built.included) == 3 and built.messages[0].content not in counted
    counted.clear()
    near = assemble(ContextParts("How fast is the API?", "2024-04-26", recalled=turns, memory_read=True), words,
                    built.tokens + 10)
    assert near.messages[0].content in counted  # near the budget: counted as written
