"""A long recalled turn quoted around the sentence that matched, so a small window holds several notes, not one.

A turn is cut to about `words` words: its speaker label, then from a little before the matched sentence on, with
"…" where words were left out. The sentence is the one recall found closest in meaning (core.memory.recall);
without it, or when it cannot be found in the text, the turn is left as it is (the budget then admits it whole or
not at all).
"""
from __future__ import annotations

import re

FLOOR_TOKENS = 48  # never cut a turn below this many tokens
WORDS_PER_TOKEN = 0.7  # English text: ~1.4 tokens a word for the tokenizers of the supported models
LEAD_SHARE = 0.2  # the share of the excerpt spent on the words before the matched sentence
_LABEL = re.compile(r"^[\w .'-]{1,40}: ")


def around(text: str, sentence: str, words: int) -> str:
    flat, wanted = " ".join(text.split()), " ".join(sentence.split())
    label = _LABEL.match(flat)
    head = label[0] if label else ""
    body = flat[len(head):].split(" ")
    where = flat.find(wanted, len(head)) if wanted else -1
    if len(body) <= words or where < 0:
        return text
    at = len(flat[len(head):where].split())
    start = max(0, min(at - int(words * LEAD_SHARE), len(body) - words))
    end = start + words
    return (head + ("… " if start > 0 else "") + " ".join(body[start:end]) + (" …" if end < len(body) else ""))
