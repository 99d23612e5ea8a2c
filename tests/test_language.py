"""The gibberish guard and the support score: real sentences of every style pass, a random model's text fails."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import Settings
from core.memory.grounding import content_words, lexical_support, reason_counts, support
from core.memory.language import language_problem

REAL = [
    # short claims and answers, as a model writes them
    "Prefers short answers", "Likes tea", "Is a nurse", "Loves espresso.", "Denver", "Yes", "Ok", "Vegan",
    "Night owl", "Hates mornings!", "Prefers dark mode.", "Hi there", "Thanks!", "hmm, not sure",
    # questions and statements with names, numbers, units, abbreviations, symbols
    "Which espresso machine do you own?", "Where do you live now?", "The user is allergic to penicillin.",
    "Works night shifts at St. Mary's hospital and prefers e-mail over calls.",
    "Asked about the U.S. visa rules for a trip on 2024-05-01 (around 3.5 weeks away).",
    "Mr Smith, my landlord, raised the rent by 10% — annoying!", "Uses an iPhone 15 and a MacBook; likes YouTube.",
    "Drinks ~3 cups of coffee a day ☕", "Has a dog named Rex & two cats.", "I'm moving to Berlin in May, I think?",
    "Prefers metric units (km, kg) over imperial ones.", "Wants code examples in Python 3.12, not JavaScript.",
    "Interested in the history of the NHS and the BBC.", "Likes jazz, blues and rock'n'roll.",
    "Lives in Zürich with Søren and Zoë.", "Born in 1987; turned 37 last week.", "Meeting at 10:30am on Friday",
    "Reads sci-fi — mostly Le Guin, Banks and Liu Cixin (刘慈欣).", "My daughter Lina likes jellyfish.",
    "Finds the 9-to-5 routine exhausting.", "Uses Linux at work and macOS at home.", "COVID-19 vaccine booked.",
    "Strengths: patience and a strong memory.", "Doesn't eat pork.", "Eats gluten-free since 2019.",
    "Has a PhD in chemistry.", "Sent $200 to their brother.", "Knows SQL, Python, and C++.",
    "Follows the Premier League (Arsenal).", "...and then the train was late.",
    # other languages and scripts
    "Aime les réponses courtes et précises.", "Où habitez-vous maintenant ?", "Il préfère le thé au café.",
    "Mag keine langen Antworten und trinkt gern Kaffee.", "Die Krankenversicherung zahlt das nicht.",
    "Prefiere respuestas cortas y directas.", "¿Dónde vives ahora?", "Gosta de caminhadas aos fins de semana.",
    "Lavora come infermiera a Milano.", "Mieszka w Krakowie i lubi góry.", "Любит короткие ответы.",
    "Где вы живёте сейчас?", "短い回答を好む。", "東京に住んでいます。", "喜欢简短的回答。", "你现在住在哪里？",
    "짧은 답변을 선호한다.", "يفضل الإجابات القصيرة.", "מעדיף תשובות קצרות.", "छोटे उत्तर पसंद करते हैं।",
    "Thích câu trả lời ngắn gọn.", "Kısa cevapları tercih ediyor.", "Προτιμά σύντομες απαντήσεις.",
]
TINY = json.loads((Path(__file__).parent / "data" / "tiny_model_output.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("sentence", REAL)
def test_real_sentences_are_language(sentence):
    assert language_problem(sentence) == ""


@pytest.mark.parametrize("junk, why", [
    ("", "empty"), ("— –", "no words"), (":)", "starts with a separator"), ("mil{", "holds '{'"),
    ("ntnt bjbjbj ningningning w", "not word-like"), ("no no no no no", "one word repeated"),
    ("cat кошка 猫 γάτα", "letters of 4 scripts mixed"), ("ok\u0007", "holds a control"),
])
def test_what_is_not_language_says_why(junk, why):
    assert language_problem(junk).startswith(why)


def test_the_tiny_random_models_output_fails_the_guard_and_the_support_check():
    """Captured from the tiny random-weight model (tests/data/tiny_model_output.json says how): the guard alone
    turns down nearly all of it; what is left is fragments the user never said, which no support lets through."""
    strings, episodes = TINY["strings"], TINY["episodes"]
    passed = [s for s in strings if not language_problem(s)]
    assert len(strings) > 400 and len(passed) / len(strings) < 0.02, passed
    floor = Settings().grounding.min_support
    assert [s for s in passed if lexical_support(s, episodes) >= floor] == []


def test_support_is_the_share_of_a_claims_content_words_in_its_evidence():
    assert content_words("The user prefers short answers") == {"short", "answe"}  # stop and hypothesis verbs out
    assert lexical_support("Prefers short answers", ["Please keep answers short"]) == 1.0
    assert lexical_support("Likes hiking and jazz", ["I like hiking"]) == 0.5
    assert lexical_support("Has 3 kids", ["I have 2 kids"]) == 0.5  # a number must be the same number
    assert lexical_support("喜欢徒步", ["我喜欢周末徒步"]) == pytest.approx(2 / 3)  # character pairs: 欢徒 is new
    assert lexical_support("the user", ["the user"]) == 0.0  # a claim of stop words supports nothing
    found = support("Prefers short answers", ["Too long again"])
    assert found.cosine is None and not found.passes(0.5, 0.4) and found.describe() == "words 0%"


def test_reasons_are_counted_by_their_head():
    assert reason_counts(["not language: starts with a separator", "not language: holds '{'",
                          "not supported by its evidence (words 0%)"]) == {"not language": 2,
                                                                            "not supported by its evidence": 1}
