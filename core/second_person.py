"""What Engram believes about you, said to you: "User likes tea" is shown as "You like tea".

Facts are stored as the extraction model words them, about "User" / "the user" (core.prompts.engram asks for that:
recall matches them against the user's questions, and the text is theirs). Display turns them round for the person
reading them: the subject becomes "You" and its verb agrees (likes → like, is → are, has → have, was → were,
doesn't → don't, studies → study, watches → watch), "User's" becomes "your". Only what can be read without doubt is
changed: a sentence whose word after "User" is not clearly a verb ("User Smith …", "User preferences include …")
is shown as stored, never as a half-turned sentence. A memory in the user's own words (added by hand, or imported)
is turned too: "I'm allergic to penicillin." → "You're allergic to penicillin.", "My sister…" → "Your sister…";
only a sentence with the English "I" or starting with "My" (Spanish "Me llamo…" is not English "me"). Pure text in,
text out; storage is never touched.
"""
from __future__ import annotations

import re

APOSTROPHES = "'\u2019"
# The verb that follows a singular subject, and the one that follows "you".
IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do", "goes": "go", "isn't": "aren't",
             "wasn't": "weren't", "hasn't": "haven't", "doesn't": "don't"}
# -s words that are not a verb with -s added (or whose base the rules below would get wrong).
BASE_EXCEPTIONS = {"focuses": "focus", "biases": "bias", "aches": "ache", "caches": "cache", "canoes": "canoe",
                   "tiptoes": "tiptoe", "shoes": "shoe", "dies": "die", "lies": "lie", "ties": "tie", "vies": "vie"}
# Words ending in -s after "User" that are no verb.
NOT_VERBS = {"this", "his", "hers", "its", "ours", "yours", "theirs", "yes", "plus", "thus", "unless", "whereas",
             "perhaps", "besides", "towards", "afterwards", "nevertheless", "news", "series", "species",
             # plural nouns that follow "User" in a compound ("User preferences: dark mode")
             "preferences", "settings", "details", "notes", "profiles", "interests", "goals", "habits", "hobbies",
             "stats", "favorites", "favourites", "friends", "kids", "parents", "accounts", "messages", "files"}
# Already right after "you": modals, and past forms that are not -ed.
UNCHANGED = {
    "can", "could", "will", "would", "shall", "should", "may", "might", "must", "can't", "cannot", "won't",
    "wouldn't", "couldn't", "shouldn't", "mustn't", "used", "went", "had", "did", "got", "made", "took", "saw",
    "came", "left", "bought", "brought", "thought", "told", "said", "met", "ran", "won", "lost", "began", "drove",
    "flew", "grew", "knew", "wrote", "ate", "drank", "sang", "swam", "gave", "found", "felt", "kept", "slept",
    "spent", "sent", "built", "taught", "caught", "fought", "sold", "held", "stood", "understood", "wore",
    "broke", "chose", "spoke", "forgot", "became", "paid", "heard", "fell", "led", "meant", "rode", "threw",
    "woke", "sat", "hid", "shook", "quit", "put", "cut", "hurt", "let", "set", "read", "didn't", "hadn't",
    "never", "once", "also", "always", "often", "still", "sometimes", "usually", "no", "now", "just", "even",
    "already", "rarely", "seldom", "really", "recently", "mostly", "only", "again", "currently", "previously",
    "occasionally", "frequently", "regularly", "typically", "generally", "normally", "actually", "longer",
}
ADVERBS = {"never", "once", "also", "always", "often", "still", "sometimes", "usually", "now", "just", "even",
           "already", "rarely", "seldom", "really", "recently", "mostly", "only", "again", "currently",
           "previously", "occasionally", "frequently", "regularly", "typically", "generally", "normally",
           "actually", "no", "longer", "not", "definitely", "probably", "sometime", "then", "too"}
# After these a plural noun ("User preferences include …"), not a verb, came before: leave the sentence alone.
AFTER_A_NOUN = {"are", "were", "is", "was", "have", "has", "had", "do", "does", "did", "include", "includes",
                "can", "could", "will", "would", "should", "must", "may", "might", "remain", "seem", "seems"}
# Mid-sentence "the user" is "you" where what follows leaves no doubt it is the object.
AFTER_AN_OBJECT = {"to", "with", "for", "about", "at", "in", "on", "and", "or", "but", "by", "from", "that",
                   "of", "as", "when", "if", "because", "since", "before", "after", "during", "every", "each",
                   "again", "today", "yesterday", "tomorrow", "twice", "once", "often", "sometimes", "directly"}
REFLEXIVE = re.compile(r"\b(?:him|her|them)sel(?:f|ves)\b")
# Possessives that can only be the user's when nobody else was named before them in the sentence.
OWN_POSSESSIVE = re.compile(r"\b(?:his|their)\b")
SOMEONE_ELSE = re.compile(r"\b(?:[A-Z][a-z]+|sister|brother|mother|father|mom|mum|dad|wife|husband|partner|"
                          r"friend|son|daughter|child|kid|boss|manager|teacher|colleague|neighbou?r|aunt|uncle|"
                          r"cousin|grandmother|grandfather|grandma|grandpa|girlfriend|boyfriend|coach|doctor)s?\b")

SENTENCE = re.compile(r"(?<=[.!?])(\s+)")
POSSESSIVE_START = re.compile(rf"(?:the\s+)?user[{APOSTROPHES}]s(?![\w-])", re.IGNORECASE)
SUBJECT_START = re.compile(rf"(?:the\s+)?user(?![\w{APOSTROPHES}-])", re.IGNORECASE)
WORD = re.compile(rf"[A-Za-z]+(?:[{APOSTROPHES}][A-Za-z]+)?")
# Further in: "the user's" or "User's" (a capital: the model's name for the user, not "a user's").
POSSESSIVE_LATER = re.compile(rf"\b(?:[Tt]he\s+[Uu]ser|User)[{APOSTROPHES}]s(?![\w-])")
OBJECT_LATER = re.compile(rf"\b(?:[Tt]he\s+[Uu]ser|User)(?![\w{APOSTROPHES}-])")


# The user speaking of themself. "I" only as a capital; the verb after it agrees with "you" already, but for these.
FIRST_PERSON_ANCHOR = re.compile(rf"(?<![\w{APOSTROPHES}-])I(?![\w-])|^\s*My\b")
FIRST_PERSON = re.compile(rf"(?<![\w{APOSTROPHES}-])(I(?:[{APOSTROPHES}]m| am| was| wasn[{APOSTROPHES}]t)?"
                          rf"|I(?=[{APOSTROPHES}](?:ve|d|ll)\b)|[Mm]yself|[Mm]ine|[Mm]y|me)"
                          rf"(?![\w-])(?![{APOSTROPHES}]s)")
PERSONS = {"my", "mine", "myself", "me", "you", "your", "yours", "yourself", "user"}  # before "I": not a name
SAID_TO_YOU = {"i": "you", "i'm": "you're", "i am": "you are", "i was": "you were", "i wasn't": "you weren't",
               "me": "you", "my": "your", "mine": "yours", "myself": "yourself"}


def to_second_person(text: str) -> str:
    """`text` (a stored fact about the user) said to the user; text that is not about "User" nor in the first
    person comes back as it is."""
    first_person = isinstance(text, str) and bool(FIRST_PERSON_ANCHOR.search(text))
    if not isinstance(text, str) or ("user" not in text.lower() and not first_person):
        return text
    parts = SENTENCE.split(text)
    return "".join(part if n % 2 else _sentence(part, first_person) for n, part in enumerate(parts))


def _sentence(sentence: str, first_person: bool) -> str:
    lead = sentence[:len(sentence) - len(sentence.lstrip())]
    body = sentence[len(lead):]
    turned = _possessive_start(body) or _subject_start(body)
    body = _later_mentions(turned if turned is not None else body)
    return lead + (_first_person(body) if first_person else body)


def _first_person(body: str) -> str:
    """ "I'm allergic to penicillin" → "You're allergic to penicillin"; "Ana gave me my keys" → "… you your
    keys"."""
    def said_to_you(found: re.Match) -> str:
        words = found.group()
        if words == "I" and (_numeral(body, found) or _agrees_with_he(body, found.end())):
            return words
        plain = words.lower().replace("\u2019", "'")
        turned = _apostrophe_like(SAID_TO_YOU[plain], words)
        return turned[:1].upper() + turned[1:] if found.start() == 0 else turned
    return FIRST_PERSON.sub(said_to_you, body)


# Read at a position in the sentence rather than on slices of it: a slice per "I" made "I I I …" quadratic.
NEXT_WORD = re.compile(rf" \s*({WORD.pattern})")
NAME_BEFORE = re.compile(r"([A-Z][a-z]+)\s$")
NAME_LOOKBACK = 100  # a name before its numeral ("Henry I") is a few characters long
NUMERAL_AFTER = re.compile(r"\s*$|[.,;:!?)]|\s+of\b")


def _agrees_with_he(body: str, end: int) -> bool:
    """ "I is", "I likes": not English first person; shown as stored rather than as "You is"."""
    following = NEXT_WORD.match(body, end)
    word = following.group(1).lower().replace("\u2019", "'") if following else ""
    return word in IRREGULAR or (word not in ADVERBS and _third_person(word))


def _numeral(body: str, found: re.Match) -> bool:
    """ "Henry I", "World War I.", "Henry I of England": a name's numeral, not the user."""
    name = NAME_BEFORE.search(body, max(0, found.start() - NAME_LOOKBACK), found.start())
    return bool(name and name.group(1).lower() not in PERSONS and NUMERAL_AFTER.match(body, found.end()))


def _possessive_start(body: str) -> str | None:
    found = POSSESSIVE_START.match(body)
    if not found or not body[found.end():].startswith(" "):
        return None
    return _cased("Your", found.group()) + body[found.end():]


def _subject_start(body: str) -> str | None:
    """ "User likes tea" → "You like tea"; None when the word after "User" is not plainly a verb."""
    found = SUBJECT_START.match(body)
    if not found:
        return None
    rest = body[found.end():]
    words = list(WORD.finditer(rest))
    index = 0
    while index < len(words) - 1 and words[index].group().lower() in ADVERBS:
        index += 1  # "User no longer eats meat": the verb is after the adverbs
    if not words or not _gap_is_plain(rest, words, index):
        return None
    verb = words[index]
    if rest[verb.end():verb.end() + 1] not in ("", " ", ".", "!", "?"):
        return None  # "User preferences: …", "User likes-tea": not plainly a verb ending its word
    following = words[index + 1].group().lower() if index + 1 < len(words) else ""
    base = _base_form(verb.group(), following)
    if base is None:
        return None
    turned = rest[:verb.start()] + base + rest[verb.end():]
    return _cased("You", found.group()) + _own_words(turned)


def _gap_is_plain(rest: str, words: list[re.Match], index: int) -> bool:
    """Only spaces between "User", the adverbs and the verb: "User, a nurse, works …" is left as stored."""
    end = 0
    for word in words[:index + 1]:
        if not rest[end:word.start()] or rest[end:word.start()].strip(" "):
            return False
        end = word.end()
    return True


def _base_form(verb: str, following: str) -> str | None:
    """The form after "you" of the verb after "User" (its case kept), or None when it may not be a verb."""
    lower = verb.lower()
    plain = lower.replace("\u2019", "'")
    if plain in IRREGULAR:
        return _apostrophe_like(_cased(IRREGULAR[plain], verb), verb)
    if plain in UNCHANGED or (plain.endswith("ed") and len(plain) > 3 and plain.isalpha()):
        return verb
    if not _third_person(plain) or following in AFTER_A_NOUN:
        return None
    return _cased(_strip_s(plain), verb)


def _third_person(word: str) -> bool:
    return (word.isalpha() and word.isascii() and len(word) >= 3 and word.endswith("s")
            and not word.endswith(("ss", "us", "ous")) and word not in NOT_VERBS)


def _strip_s(word: str) -> str:
    if word in BASE_EXCEPTIONS:
        return BASE_EXCEPTIONS[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"  # studies → study, carries → carry
    if word.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        return word[:-2]  # misses → miss, washes → wash, watches → watch, fixes → fix, goes → go
    return word[:-1]  # likes → like, plays → play, uses → use, freezes → freeze


def _own_words(rest: str) -> str:
    """In a sentence about you, "himself" is "yourself", and "his" / "their" are "your" until someone else is
    named (after "his sister", a later "their" may be hers)."""
    other = SOMEONE_ELSE.search(rest)
    cut = other.start() if other else len(rest)
    return OWN_POSSESSIVE.sub("your", REFLEXIVE.sub("yourself", rest[:cut])) + rest[cut:]


def _later_mentions(body: str) -> str:
    """ "Ana is the user's teacher" → "Ana is your teacher"; "Ana called the user twice" → "… called you twice".
    A mention that starts the sentence is the subject: turned by _subject_start, or left as stored."""
    body = POSSESSIVE_LATER.sub(lambda found: "your" if found.start() else found.group(), body)
    return OBJECT_LATER.sub(lambda found: _object(found, body) if found.start() else found.group(), body)


def _object(found: re.Match, text: str) -> str:
    after = text[found.end():]
    if _after_determiner(text[:found.start()]):
        return found.group()  # "a User …", "every user": someone else
    if not after.strip() or re.match(r"\s*[.,;:!?)]", after):
        return "you"
    following = WORD.match(after.lstrip())
    if following and after[:1] == " " and following.group().lower() in AFTER_AN_OBJECT:
        return "you"
    return found.group()  # "Ana says the user likes tea": a subject whose verb is not turned; left as stored


def _after_determiner(before: str) -> bool:
    last = before.rstrip().rsplit(" ", 1)[-1].lower()
    return last in {"a", "an", "another", "every", "each", "any", "no", "one", "this", "that"}


def _cased(word: str, like: str) -> str:
    """`word` in the case of `like`: LIKES → LIKE, Likes → Like ("You" and "Your" always start with a capital)."""
    letters = [c for c in like if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _apostrophe_like(word: str, like: str) -> str:
    return word.replace("'", "\u2019") if "\u2019" in like else word
