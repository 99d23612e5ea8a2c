"""Which query words a recalled hit shares (core.memory.recall_explain._matched_terms): the same words as stemming
every word of the hit would name, read from a bounded head of the text, so a long imported turn costs little."""
from __future__ import annotations

import random

from core.memory.query import WORD, analyse, stem
from core.memory.recall_explain import SCANNED_CHARS, _matched_terms

VOCABULARY = ("moved moving move movies movie city cities boxes box fox foxes wished wish running runs ran studies "
              "study studying as is us cat cats Porto porto lived lives living café cafés naïve ok go goes").split()


def _every_word_stemmed(analysis, text: str) -> list[str]:
    """The definition: each word of the text, and its stem, against each term and its stem."""
    words = {form for word in WORD.findall(text.lower()) for form in (word, stem(word))}
    return [t for t in analysis.terms if t in words or stem(t) in words]


def test_the_same_words_as_stemming_every_word_of_the_text():
    rng = random.Random(5)
    for _ in range(2000):
        query = analyse(" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 5))))
        text = " ".join(rng.choices(VOCABULARY, k=rng.randint(0, 30)))
        assert _matched_terms(query, text) == _every_word_stemmed(query, text), (query.terms, text)


def test_a_long_turn_is_read_only_as_far_as_its_head():
    query = analyse("when did I move to Porto and adopt the cats")
    head = "I moved to Porto in May. " * 40
    text = head + "lorem ipsum dolor " * (200_000 // 18) + " adopted cats"
    assert len(text) > 10 * SCANNED_CHARS
    assert _matched_terms(query, text) == ["porto"]  # "cats", past the head, is not read
    assert _matched_terms(query, text[-SCANNED_CHARS:]) == ["adopt", "cats"]
