"""bench/realtext.py: the large benches' turns are distinct, recombined from real sentences of different messages,
the same on every run, and the questions asked of them are the data's own, none of them a stored turn."""
from __future__ import annotations

import pytest

from bench import realtext


@pytest.fixture(scope="module")
def pool():
    try:
        return realtext.sentence_pool()[0]
    except FileNotFoundError as exc:
        pytest.skip(f"the shared LoCoMo/BEAM data is not here: {exc}")


def test_turns_are_distinct_deterministic_and_drawn_from_different_messages(pool):
    made = realtext.turns(3000)
    assert made == realtext.turns(3000) and made != realtext.turns(3000, seed=1)
    texts = [realtext.text(parts) for parts in made]
    assert len(set(texts)) == len(texts) == 3000
    for parts in made:
        assert 2 <= len(parts) <= 3 and len({pool[i][0] for i in parts}) == len(parts)


def test_the_pool_holds_real_sentences_without_markup(pool):
    assert len(pool) > 10_000  # LoCoMo's and BEAM's dev conversations
    sentences = [s for _source, s in pool]
    assert len(set(sentences)) == len(sentences)
    assert not any("->->" in s or "`" in s or "{" in s for s in sentences)
    assert all(4 <= len(s.split()) <= 40 for s in sentences)


def test_the_questions_are_the_datas_own_and_none_is_stored(pool):
    asked = realtext.questions(300)
    assert len(set(asked)) == 300 and all(q.strip() for q in asked)
    stored = {realtext.text(parts) for parts in realtext.turns(3000)}
    assert not stored & set(asked)
