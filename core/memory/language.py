"""A gibberish guard: is a model's text language at all, before anything it says is kept?

A weak or random-weight model emits fragments of words run together, stray symbols and letters of several
scripts inside one word (":Paris becausemilygredoppy˛ cenȜ w蝻"). Real text in any language is made of
tokens that each look like a word of one script, with punctuation at their edges. The guard measures that:

- a hard no for characters no sentence holds: controls, private-use or unassigned code points, braces;
- a hard no for text that starts with a separator (",", ":", ";", ")"...): a sentence never does;
- the share of tokens that are word-like (letters of one script, a plausible shape: a vowel, no long consonant
  run, no camel-case run-ons, no repeated fragment; or a number, possibly with a unit) must reach WORDLIKE_SHARE;
- at most two scripts of letters (a name in another script is fine; three is noise);
- no single token making up most of a longer text ("no no no no").

It needs no dictionary, so a short claim ("Likes tea") or a sentence in French, German, Russian, Japanese or
Arabic passes, and it costs microseconds.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

WORDLIKE_SHARE = 0.85  # real sentences of every style score ≥ 0.9 (most 1.0); the tiny random model ≤ 0.8
MAX_REPEAT_SHARE = 0.5  # one token making up more than half of a text of 4+ tokens is a stutter
MAX_WORD_LETTERS = 24  # longer than German's everyday compounds: a run-on of fragments
MAX_CONSONANT_RUN = 5  # "angstschw" aside, no language writes 6 consonants in a row in Latin script
_SEPARATOR_START = tuple(",:;)]}|.!?>=")
_FORBIDDEN = set("{}\\|<>=^`")
_SPLIT = re.compile(r"[\s\u3000、，。！？：；「」『』（）]+")
_VOWELLESS_WORDS = frozenset("mr mrs ms dr st nth hmm shh pfft brr psst tsk km kg cm mm ml lb lbs hz kb mb gb tb "
                             "kwh mph bpm".split())
_NUMBER = re.compile(r"^[+-]?\d+([.,:/-]\d+)*(%|[a-z]{1,3})?$")
_REPEATED_FRAGMENT = re.compile(r"(.{2,})\1\1")
# Latin letters real text uses: ASCII, Latin-1, Extended-A, Vietnamese/Pinyin/Romanian parts of Extended-B,
# Extended Additional. IPA letters, modifier letters and the rest of Extended-B are a model's noise.
_LATIN_RANGES = ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF))
_LATIN_EXTENDED_B_USED = ((0x1A0, 0x1B0), (0x1CD, 0x1DC), (0x218, 0x21B))
_CJK_FAMILY = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")


def language_problem(text: str) -> str:
    """Why `text` is not language ('' when it is)."""
    text = unicodedata.normalize("NFC", text).strip()
    if not text:
        return "empty"
    bad = _bad_character(text)
    if bad:
        return bad
    if text.startswith(_SEPARATOR_START) and not text.startswith(("...", "…")):
        return "starts with a separator"
    split = [(lead, core) for lead, core in (_core(t) for t in _SPLIT.split(text)) if core]
    if not split:
        return "no words"
    tokens = [core for _, core in split]
    kinds = [_token_script(core) if _opening(lead) else None for lead, core in split]
    share = sum(k is not None for k in kinds) / len(kinds)
    if share < WORDLIKE_SHARE:
        return f"not word-like ({share:.0%} of its tokens are words)"
    scripts = {k for k in kinds if k not in (None, "NUMBER")}
    if len(scripts) > 2:
        return f"letters of {len(scripts)} scripts mixed"
    if len(tokens) >= 4 and Counter(t.lower() for t in tokens).most_common(1)[0][1] / len(tokens) > MAX_REPEAT_SHARE:
        return "one word repeated"
    return ""


def is_language(text: str) -> bool:
    return not language_problem(text)


def _bad_character(text: str) -> str:
    for char in text:
        category = unicodedata.category(char)
        if char in "\n\t":
            continue
        if category in ("Cc", "Co", "Cn", "Cs") or char == "\ufffd":
            return "holds a control or unassigned character"
        if char in _FORBIDDEN:
            return f"holds {char!r}, which no sentence does"
    return ""


def _core(token: str) -> tuple[str, str]:
    """What stands before a token's word, and the word without the punctuation and symbols at its edges
    ('"(Likes' → '"(', 'Likes'; 'tea!)' → '', 'tea')."""
    start, end = 0, len(token)
    while start < end and _edge(token[start]):
        start += 1
    while end > start and _edge(token[end - 1]) and token[end - 1] != "%":
        end -= 1
    return token[:start], token[start:end]


def _opening(lead: str) -> bool:
    """Before a word stand opening marks ('(', '"', '¿', '-', an ellipsis), never closing ones: ',Beif', '[.ce'."""
    return not re.search(r"[,;:!?)\]}]|(?<!\.)\.(?!\.)", lead.replace("...", "…"))


def _edge(char: str) -> bool:
    """Punctuation, spaces and symbols (emoji, currency) may stand at a word's edges; a modifier mark may not."""
    category = unicodedata.category(char)
    return category[0] in "PZ" or category in ("Sc", "Sm", "So")


def _token_script(token: str) -> str | None:
    """The script of a word-like token ('NUMBER' for a number), or None when it is not word-like."""
    if _NUMBER.match(token.lower()):
        return "NUMBER"
    parts = re.split(r"[-'’.]", token)
    if any(not p for p in parts[:-1]) or len(parts) > 5:  # "e.g." ends with an empty part; "a--b" does not pass
        return None
    clitic = "'" in token or "’" in token  # "doesn't", "rock'n'roll": short pieces need no vowel of their own
    scripts = {_part_script(p, shape=not (clitic and len(p) <= 2)) for p in parts if p and not p.isdigit()}
    if not scripts:
        return "NUMBER"  # "9-to-5" has words; "24-7" is a number
    if len(scripts) != 1 or None in scripts:
        return None
    return scripts.pop()


def _part_script(part: str, shape: bool = True) -> str | None:
    if not all(c.isalpha() or unicodedata.category(c) in ("Mn", "Mc") for c in part) or not part[0].isalpha():
        return None  # letters, and the vowel signs of Indic scripts (Mn/Mc) after a letter
    scripts = {_script(c) for c in part}
    if len(scripts) != 1 or None in scripts:
        return None  # a combining mark of another script ("red͚") or a stray letter ("w蝻") is noise
    script = scripts.pop()
    if len(part) > MAX_WORD_LETTERS and script not in _CJK_FAMILY:
        return None  # first: the shape check's fragment search is quadratic in the word's length
    if script == "LATIN" and shape and not _plausible_latin(part):
        return None
    return script


def _script(char: str) -> str | None:
    code = ord(char)
    if any(a <= code <= b for a, b in _LATIN_RANGES):
        if 0x180 <= code <= 0x24F and not any(a <= code <= b for a, b in _LATIN_EXTENDED_B_USED):
            return None
        return "LATIN"
    name = unicodedata.name(char, "")
    if not name or "MODIFIER" in name or "LATIN" in name:
        return None  # IPA and modifier letters: never a word's letter in running text
    first = name.split()[0]
    return "CJK" if first in _CJK_FAMILY else first


def _plausible_latin(word: str) -> bool:
    lower = word.lower()
    capitals = sum(c.isupper() for c in word)
    if len(word) == 1:
        return word.isupper() or lower in "aioeuyàèéòùwz"  # an initial; the one-letter words of en/fr/es/it/pl
    if capitals == len(word):
        return len(word) <= 6  # an acronym (NHS, BBC) needs no vowel
    humps = [n for n, (a, b) in enumerate(zip(word, word[1:]), 1) if a.islower() and b.isupper()]
    if len(humps) > 1 or (humps and word[0].islower() and humps[0] > 1 and not word[humps[0]:].isupper()):
        return False  # "leaParisIbj", "yearuseAomors": fragments run together ("McDonald", "iPhone", "macOS" pass)
    acronym_like = capitals >= 2 and len(word) <= 6  # PhD, MSc
    if not any(_vowel(c) for c in lower) and lower not in _VOWELLESS_WORDS and not acronym_like:
        return False
    if _REPEATED_FRAGMENT.search(lower):
        return False
    run = 0
    for char in lower:
        run = 0 if _vowel(char) else run + 1
        if run > MAX_CONSONANT_RUN:
            return False
    return True


def _vowel(char: str) -> bool:
    """A Latin vowel, accented or not ("ắ" in Vietnamese, "ø" in Danish)."""
    return unicodedata.normalize("NFD", char)[0].lower() in "aeiouyæœø"
