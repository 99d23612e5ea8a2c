"""A fact's relation must be said, not only its object: the word that makes it that relation stands in the user's
clause that holds the object.

Grounding by the object's words kept Qwen2.5-0.5B's (user, likes, metformin) from "I take metformin every morning",
and "likes" marathon, cello and green tea from statements of doing: the model answers with the prompt's first
example relation, and every word of the object was the user's. So each relation needs its cue in the same clause as
its object (a clause ends at . ; ! ? or where another subject starts: ", they…", "and I…", "because…"):

- a liking (likes, loves, enjoys, favourite, prefers, fan of…) a word of liking, not negated: "I love jellyfish",
  "my favourite book is Dune", "I'm a big fan of jazz"; a negated one ("I don't like olives", "not a fan of") is
  a disliking, and a negated disliking ("I don't hate it") is neither;
- a disliking (dislikes, hates…) a word of disliking ("I hate", "can't stand") or a negated liking;
- a relation of a kind the prompt names (allergy, medication, condition, diet, birthday, a place one lives in, a
  job) a word of that kind ("allergic", "take", "born", "live", "work", "I'm a…");
- any other relation one of its own words, lightly stemmed ("drinks" ← "I drink", "training_for" ← "I'm training").

And what the clause denies is no fact of a positive relation: "I'm not allergic to peanuts" is no allergy, "I live
in Porto, not Lisbon" no home in Lisbon. An object the user did not say in any clause (a paraphrase) is not judged
here: grounding's word check still holds it.
"""
from __future__ import annotations

import re

from core.memory.critical import canonical_relation
from core.memory.fact_shape import OTHER_PREPOSITIONS, PEOPLE_WORDS, PLACE_PREPOSITIONS, relation_kind
from core.memory.grounding import content_words

_SENTENCE = re.compile(r"[.;!?\n]")
_CLAUSE = re.compile(r"\bbut\b|\b(?:because|since|although|though|whereas|while)\b"
                     r"|,\s*(?=(?:and |so |then )?(?:i|i'm|i've|i'd|we|he|she|they|it|it's|my|our|not)\b)"
                     r"|\b(?:and|so|or)\s+(?=(?:i|i'm|i've|we|he|she|they|my|our)\b)", re.IGNORECASE)
_LIKING_CUE = re.compile(
    r"\b(?:lov(?:e|es|ed|ing)|enjoy(?:s|ed|ing)?|ador(?:e|es|ed|ing)|fans?|favou?rites?|faves?|"
    r"prefer(?:s|red|ring|ence|ences)?|fond|keen on|passionate|obsessed|crazy about|big on|appreciat(?:e|es|ed)|"
    r"likes|liked|liking|like)\b")
# "like" is a liking after its subject or an adverb, not in "looks like", "things like tea" or "I'd like a tea".
_LIKE_AFTER = frozenset("i we you they really also do does did still actually just quite absolutely totally truly "
                        "genuinely always definitely both not don't doesn't didn't dont to".split())
_DISLIKING_CUE = re.compile(r"\b(?:hat(?:e|es|ed|ing)|dislik(?:e|es|ed|ing)|detest(?:s|ed)?|loath(?:e|es|ed)|"
                            r"despis(?:e|es|ed)|(?:can't|cannot|can not|couldn't) (?:stand|bear)|sick of|"
                            r"tired of|annoy(?:s|ed)?)\b")
_NEGATION = re.compile(r"\b(?:not|never|no|nor|without|hardly|neither|none|no longer)\b|n't\b")
_OBJECT_DENIED = frozenset("not no never without nor except instead than neither".split())  # "without emojis"
_LIKING = frozenset("like likes loves love enjoys enjoy favourite favorite fave favourites favorites prefers prefer "
                    "preferred preference preferences fan adores adore fond".split())
_DISLIKING = frozenset("dislikes dislike hates hate detests detest loathes loathe despises despise".split())
_NEGATIVE = frozenset("not no never dislikes dislike hates hate avoids avoid without cannot can't".split())
# Kinds the prompt names, and the words that say each ("take" a medicine, "live" somewhere).
_KIND_CUES = {
    "allergy": r"allerg\w*|intoleran\w*|anaphyla\w*|reactions?|react\w*|sensitiv\w*|epipen",
    "medication": r"tak(?:e|es|ing)|took|(?:i'm|am|was|been) on|prescri\w*|medic\w*|meds|pills?|tablets?|doses?|mg|"
                  r"inhaler|inject\w*",
    "condition": r"diagnos\w*|ha(?:ve|s|d)|suffer\w*|living with|condition|chronic|disorder|disease|illness|"
                 r"syndrome|diabetic|asthmatic|epileptic",
    "diet": r"diet\w*|eat\w*|ate|food|vegetarian|vegan|pescatarian|halal|kosher|gluten\w*|lactose|meat|dairy|"
            r"celiac|coeliac",
    "birthday": r"birthday|born|birth",
    "place": r"liv(?:e|es|ed|ing)|moved?|moving|relocat\w*|resid\w*|based|home|hometown|from|grew|born|settled|"
             r"stay(?:s|ing)?",
    "job": r"work\w*|job|career|profession\w*|employed|occupation",
    "workplace": r"work\w*|job|employ\w*|company|hired|joined",
    "name": r"name\w*|called|call",
}
# Where the object itself is what the user says they are ("I'm a nurse", "Ana is a doctor", "Hi, I'm Maya").
_IS = r"(?:i'm|im|am|is|are|was|as|became|become|becoming)(?: (?:a|an|the|my))?(?: \w+){0,2}"
_KIND_OF = {name: name for name in ("allergy", "medication", "condition", "diet", "birthday")}
_GENERIC = frozenset("has have had is are was be of in at to for the a an user about does do did with on as by "
                     "from into its own owns".split())
_WORD = re.compile(r"[\w'’]+")
_DETERMINERS = frozenset("a an the my our his her their your this that these those some".split())


def cue_problem(relation: str, obj: str, own_words: str) -> str:
    """Why the user's words hold the object but not its relation ('' when they do, or when no clause holds the
    object word for word). `relation` as the model wrote it ("does not eat" is negative, though its canonical
    name is "diet")."""
    reach = _reach(obj, own_words)
    if not reach:
        return ""
    words = set(_slug(relation).split("_"))
    canonical = canonical_relation(relation)
    name = canonical.replace("_", " ")
    if words & _LIKING and not words & _NEGATIVE:
        return _feeling_problem(name, obj, reach, want=1)
    if words & _DISLIKING or (words & _LIKING and words & _NEGATIVE):
        return _feeling_problem(name, obj, reach, want=-1)
    if words & PEOPLE_WORDS:
        said = any(set(c.split()) & PEOPLE_WORDS for c in reach)
        return "" if said else f"no word of kin: '{obj}'"
    kind = _KIND_OF.get(canonical) or relation_kind(canonical)
    own = sorted({w[:4] for w in words - _GENERIC if len(w) > 2})
    cue = _KIND_CUES.get(kind) or (rf"(?:{'|'.join(own)})\w*" if own else "")
    if not cue:
        return ""
    state = _cue_state(re.compile(rf"\b(?:{cue})\b"), obj, reach)
    if words & _NEGATIVE or canonical == "hard_constraint":
        return "" if state else f"the relation is not said: '{name}' of '{obj}'"  # "I don't eat meat" says it
    if state == "said":
        return ""
    if state == "denied" or any(_object_denied(c, obj) for c in reach):
        return f"the user said it is not so: '{obj}'"
    if _said_by_shape(kind, words, obj, reach[0]):
        return ""
    return f"nothing said makes it a fact of {name}: '{obj}'" if kind in _KIND_CUES else \
        f"the relation is not said: '{name}' of '{obj}'"


def _cue_state(cue: re.Pattern, obj: str, reach: list[str]) -> str:
    """'said' when a clause within reach says the cue, 'denied' when it is only said negated, else ''."""
    state = ""
    for clause in reach:
        for found in cue.finditer(clause):
            if _object_denied(clause, obj):
                state = "denied"
            elif _NEGATION.search(" ".join(clause[:found.start()].split()[-3:])):
                state = state or "denied"
            else:
                return "said"
    return state


def _said_by_shape(kind: str, words: set[str], obj: str, clause: str) -> bool:
    """The relation's shape in other words, the clause not denying the object: what the user says they are ("I'm a
    nurse", "Ana is a doctor", "I'm Maya") for a job or a name; a relation that ends in a preposition
    ("will_travel_to") with its object after one ("I'm going to Japan"), not after the user's verb ("I take
    metformin")."""
    if _denied(clause, obj):
        return False
    if kind in ("job", "name"):
        return bool(re.search(rf"\b{_IS} {re.escape(_plain(obj))}\b", clause))
    prepositions = PLACE_PREPOSITIONS | OTHER_PREPOSITIONS
    if kind in _KIND_CUES or not words & prepositions:
        return False
    for said, at in _places(clause, obj):
        before = at - 1
        while before >= 0 and said[before] in _DETERMINERS:
            before -= 1
        if before >= 0 and said[before] in prepositions:
            return True
    return False


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9']+", "_", text.lower().replace("’", "'")).strip("_")


def _feeling_problem(relation: str, obj: str, reach: list[str], want: int) -> str:
    feelings = [_feeling(c, obj) for c in reach]
    if want in feelings:
        return ""
    if -want in feelings:
        return f"the user said the opposite of {relation}: '{obj}'"
    return f"no word of {'liking' if want > 0 else 'disliking'}: '{obj}'"


def _feeling(clause: str, obj: str) -> int:
    """+1 the clause says the user likes the object, -1 dislikes it, 0 neither (or a negated dislike)."""
    for cue, sign in ((_DISLIKING_CUE, -1), (_LIKING_CUE, 1)):
        for found in cue.finditer(clause):
            before = clause[:found.start()].split()
            if found.group(0) == "like" and (not before or before[-1] not in _LIKE_AFTER):
                continue
            negated = bool(_NEGATION.search(" ".join(before[-3:])))
            if sign > 0 and _object_denied(clause, obj):
                negated = not negated  # "I prefer answers without emojis" likes no emojis
            return sign if not negated else (-1 if sign > 0 else 0)
    return 0


def _denied(clause: str, obj: str) -> bool:
    """Whether the clause denies the object: "not Lisbon", "without emojis", "I don't take aspirin"."""
    return any(_NEGATION.search(" ".join(words[:at])) for words, at in _places(clause, obj))


def _object_denied(clause: str, obj: str) -> bool:
    """Whether the words right before the object deny it ("not Lisbon", "without emojis", "no sugar")."""
    return any(set(words[max(at - 2, 0):at]) & _OBJECT_DENIED for words, at in _places(clause, obj))


def _places(clause: str, obj: str) -> list[tuple[list[str], int]]:
    words, wanted = clause.split(), _plain(obj).split()
    return [(words, at) for at in range(len(words) - len(wanted) + 1) if words[at:at + len(wanted)] == wanted]


def _plain(text: str) -> str:
    return " ".join(_WORD.findall(text.lower().replace("’", "'")))


def _reach(obj: str, own_words: str) -> list[str]:
    """The clauses of the user's words that hold the object word for word (lower case, straight apostrophes),
    each followed by the clauses of its sentence that only refer back to it ("…, I love it", "…, I'm allergic")."""
    wanted = _plain(obj)
    if not wanted or not content_words(wanted):
        return []
    found = []
    for sentence in _SENTENCE.split(own_words.lower().replace("’", "'")):
        clauses = [_plain(c) for c in _CLAUSE.split(sentence)]
        for at, clause in enumerate(clauses):
            if not re.search(rf"\b{re.escape(wanted)}\b", clause):
                continue
            found.append(clause)
            for after in clauses[at + 1:]:
                if not _refers_back(after):
                    break
                found.append(after)
    return found


def _refers_back(clause: str) -> bool:
    """A clause of nothing but a subject, a cue and a pronoun: "I love it", "I'm allergic", "I can't stand them"."""
    rest = clause
    for cue in (_LIKING_CUE, _DISLIKING_CUE, *(re.compile(rf"\b(?:{c})\b") for c in _KIND_CUES.values())):
        rest = cue.sub(" ", rest)
    return rest != clause and not content_words(rest)
