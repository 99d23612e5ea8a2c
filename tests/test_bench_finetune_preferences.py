"""bench/finetune_preferences.py's deterministic scoring and its cases (no model): each style's check passes the
demonstrated reply and fails the same answer ignoring the preference; PrefEval and BEAM read the shared data."""
from __future__ import annotations

import pytest

from bench import finetune_preferences as prefs
from core.finetune.styles import STYLES

pytestmark = pytest.mark.skipif(not (prefs.DATA / "prefeval").is_dir(), reason="../shared/data is not here")


@pytest.mark.parametrize("style", STYLES, ids=lambda s: s.name)
def test_each_style_check_tells_the_preferred_reply_from_the_one_ignoring_it(style):
    check = prefs.STYLE_CHECKS[style.name]
    for demo in style.train + style.probes:
        assert check(demo.reply), demo.reply
        assert not check(demo.contrast), demo.contrast


def test_prefeval_counts_a_reply_that_names_the_preference_and_not_one_that_echoes_the_question():
    case = {"set": "prefeval", "preference": "I follow a strict vegetarian diet.",
            "question": "Recommend a dinner in Madrid."}
    assert prefs.score(case, "Since you are vegetarian, try the grilled vegetables.") == 1.0
    assert prefs.score(case, "Try the dinner at a steak house in Madrid.") == 0.0


def test_beam_scores_each_rubric_item_by_its_content_words():
    case = {"set": "beam", "rubric": ["code blocks with syntax highlighting", "mentions status codes"]}
    assert prefs.score(case, "Here are code blocks with syntax highlighting.") == 0.5
    assert prefs.score(case, "Code blocks, syntax highlighting, and status codes.") == 1.0


def test_the_cases_span_the_dev_topics_and_both_beam_categories():
    cases = prefs.prefeval_cases(10)
    assert len({c["topic"] for c in cases}) == 10
    beam = prefs.beam_cases(4)
    assert [c["category"] for c in beam] == ["preference_following", "instruction_following"] * 2
    assert all(c["rubric"] for c in beam)
    assert len(prefs.style_cases()) == 2 * len(STYLES)
    assert len(prefs.filler()) == 2 * prefs.FILLER_PAIRS


def test_a_limited_style_subset_spans_every_style_before_repeating_one():
    first = prefs.style_cases(len(STYLES))
    assert sorted(c["style"] for c in first) == sorted(s.name for s in STYLES)
    assert prefs.style_cases(len(STYLES) + 1)[-1]["style"] == STYLES[0].name
