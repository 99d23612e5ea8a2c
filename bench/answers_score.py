"""Deterministic scores for bench/answers.py: LoCoMo's token F1, an abstention check, and BEAM's rubric read by
word overlap where its authors use an LLM judge (never the model under test).

- LoCoMo F1 follows the repository's evaluation code (normalise: drop commas, articles and "and", punctuation;
  category 1 (multi-hop) splits the gold answer on commas and averages the best match of each part; category 3 keeps
  the part before a semicolon) except for stemming: nltk's Porter stemmer is not installed here, so `stem` strips a
  few common English suffixes instead (the same for every condition).
- Abstention: the reply says it does not know, or that the conversation does not say (ABSTAINS, a fixed list of
  phrasings). LoCoMo's own check accepts only "no information available" and "not mentioned", which a reader never
  told to say exactly that rarely writes; ABSTAINS includes both.
- A BEAM rubric item ("LLM response should state: 250ms") is met when at least half of its content words (after
  the "should state:" lead-in) occur in the reply: 1 or 0, as the authors' int() makes every verdict.
- BEAM event ordering: each rubric item is placed at the first line of the reply that meets it; Kendall tau-b
  between the reference order and those places (unmatched items tie for last), normalised to (tau + 1) / 2; 0 when
  nothing matched.
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Sequence

from scipy.stats import kendalltau

ABSTAINS = re.compile(
    r"\b(?:i (?:do not|don't|don’t) (?:know|have (?:any )?(?:information|record|details|memory))|"
    r"i (?:do not|don't|don’t|can't|cannot|can’t) (?:recall|remember|find|say|tell)|"
    r"i'?m not sure|i am not sure|not (?:mentioned|specified|stated|provided|say|said|recorded|known|clear)|"
    r"no (?:information|mention|record|details?|data|memory|notes?)|unknown|"
    r"(?:doesn't|does not|didn't|did not|don't) (?:say|mention|specify|tell|include)|"
    r"(?:isn't|is not|wasn't|was not|aren't) (?:mentioned|in my (?:memory|notes)|specified|stated|clear)|"
    r"there is no|nothing (?:about|in|on)|not in (?:my|the) (?:memory|notes|conversation)|"
    r"(?:could|can) you (?:tell|remind|clarify|share)|no information available)", re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_LEAD = re.compile(r"^\s*(?:llm )?response should (?:\w+ ){0,3}?(?:state|mention|contain|include|provide|"
                   r"list|say|acknowledge|note|explain|show|use|recommend|suggest|follow|be)\w*\s*:?\s*", re.I)
_STOP = frozenset("a an the and or of to in on at for with is are was were be been it this that i you he she they "
                  "we my your his her their our me do did does what when where who how which as by from should "
                  "state mention contain include llm response".split())
_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def normalise(text: str) -> str:
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    return [stem(w) for w in normalise(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    said, wanted = _tokens(prediction), _tokens(gold)
    common = sum((Counter(said) & Counter(wanted)).values())
    if not said or not wanted or common == 0:
        return 0.0
    precision, recall = common / len(said), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: str) -> float:
    """LoCoMo's F1 for categories 1-4 (the adversarial category is scored as abstention)."""
    if category == "multi-hop":
        parts = [p.strip() for p in prediction.split(",")] or [prediction]
        golds = [g.strip() for g in gold.split(",") if g.strip()] or [gold]
        return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


def abstains(reply: str) -> bool:
    return bool(ABSTAINS.search(reply.replace("’", "'")))


def rubric_target(item: str) -> str:
    return _LEAD.sub("", item).strip()


def _content(text: str) -> set[str]:
    return {stem(w) for w in normalise(text).split() if w not in _STOP}


def meets(reply: str, item: str) -> bool:
    wanted = _content(rubric_target(item))
    if not wanted:
        return False
    return len(wanted & _content(reply)) / len(wanted) >= 0.5


def rubric_score(reply: str, rubric: Sequence[str]) -> float:
    return sum(meets(reply, item) for item in rubric) / len(rubric) if rubric else 0.0


def order_score(reply: str, rubric: Sequence[str]) -> float:
    """(tau-b + 1) / 2 between the rubric's order and where each item first appears among the reply's lines."""
    lines = [line for line in re.split(r"\n+|(?<=[.;])\s+(?=\d+[.)]|\w)", reply) if line.strip()]
    places = [next((n for n, line in enumerate(lines) if meets(line, item)), len(lines)) for item in rubric]
    if len(rubric) < 2 or all(p == len(lines) for p in places):
        return 0.0
    tau = kendalltau(list(range(len(rubric))), places).statistic
    return 0.0 if tau is None or math.isnan(tau) else (float(tau) + 1.0) / 2.0


def evidence_recall(evidence: frozenset[str], seen: set[str]) -> float | None:
    return len(evidence & seen) / len(evidence) if evidence else None
