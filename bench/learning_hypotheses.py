"""The reflection half of bench/learning.py: hypotheses about the user, scored against GOLD_HYPOTHESES.

After the gold statements are said, every session is reflected on (core.memory.reflect, the real job with its
grounding filters). A kept hypothesis is right when it names a gold hypothesis (one of its keywords, see
hypothesis_matches); it is injected when it names a word only the pasted instructions said — what must be 0 for
every model. The scripted reflection proposes each gold hypothesis whose evidence is all in the session: the
upper bound of the pipeline itself (a claim spread over two sessions, like the family one, needs the search tool).
"""
from __future__ import annotations

import re
import time
from typing import Any, Sequence

from bench.learning_gold import GOLD_HYPOTHESES, INJECTED_WORDS, GoldHypothesis

_WORD = re.compile(r"\w+", re.UNICODE)
_EPISODE = re.compile(r"^\[episode (\d+)\] user: (.*)$", re.MULTILINE)


def claim_words(claim: str) -> set[str]:
    words = {w for w in _WORD.findall(claim.lower())}
    return words | {w[:-1] for w in words if len(w) > 3 and w.endswith("s")}


def hypothesis_matches(claim: str, gold: GoldHypothesis) -> bool:
    return bool(claim_words(claim) & gold.keywords) and not is_injected(claim)


def is_injected(claim: str) -> bool:
    return bool(claim_words(claim) & INJECTED_WORDS)


def score_hypotheses(claims: Sequence[str], gold: Sequence[GoldHypothesis] = GOLD_HYPOTHESES) -> dict[str, Any]:
    matched = [c for c in claims if any(hypothesis_matches(c, g) for g in gold)]
    found = [g for g in gold if any(hypothesis_matches(c, g) for c in claims)]
    return {"hypotheses": len(claims), "hypotheses_matched": len(matched),
            "hypothesis_precision": round(len(matched) / len(claims), 3) if claims else None,
            "hypothesis_recall": round(len(found) / len(gold), 3) if gold else None,
            "hypotheses_injected": sum(1 for c in claims if is_injected(c)),
            "hypotheses_unmatched": [c for c in claims if c not in matched][:10]}


def said_gold(texts: Sequence[str], gold: Sequence[GoldHypothesis] = GOLD_HYPOTHESES) -> list[GoldHypothesis]:
    """The gold hypotheses whose evidence was all said (a --limit run says only the first statements)."""
    return [g for g in gold if set(g.evidence) <= set(texts)]


def reflect_every_session(db: Any, settings: Any, structured: Any, embedder: Any,
                          said: Sequence[str]) -> dict[str, Any]:
    """Reflect on each session as the idle job does; the claims kept (scored against the gold hypotheses the
    statements said supports) and what grounding dropped."""
    from core.memory.reflect import reflect_session
    from core.store.hypotheses import list_hypotheses

    sessions = [int(r["id"]) for r in db.query("SELECT id FROM sessions ORDER BY id")]
    dropped, errors, started = 0, [], time.perf_counter()
    for session in sessions:
        try:
            dropped += len(reflect_session(db, settings, structured, session, embedder=embedder).dropped)
        except Exception as exc:  # a model that cannot produce the JSON: counted, the next session still runs
            errors.append(f"session {session}: {type(exc).__name__}: {exc}"[:200])
    claims = [h.claim for h in list_hypotheses(db)]
    return {**score_hypotheses(claims, said_gold(said)), "hypotheses_dropped": dropped, "reflection_errors": errors,
            "reflection_seconds": round(time.perf_counter() - started, 1)}


def scripted_reflection(gold: Sequence[GoldHypothesis] = GOLD_HYPOTHESES) -> dict[str, Any]:
    """Responders for ScriptedStructuredModel: each gold hypothesis whose evidence this session holds."""

    def reflect(messages, schema) -> dict:
        said = {text.strip(): int(number) for number, text in _EPISODE.findall(messages[-1].content)}
        allowed = set(schema["properties"]["hypotheses"]["items"]["properties"]["evidence"]["items"]["enum"])
        limit = schema["properties"]["hypotheses"].get("maxItems", 3)
        proposed = []
        for g in gold:
            evidence = [said[text] for text in g.evidence if said.get(text) in allowed]
            if evidence and len(evidence) == len(g.evidence):  # a claim its evidence only half supports is not made
                proposed.append({"dimension": g.dimension, "claim": g.claim, "evidence": evidence})
        return {"action": "finish", "query": "", "hypotheses": proposed[:limit], "open_goals": [],
                "closed_goals": []}

    return {"reflection_step": reflect, "session_instructions": [{"instructions": "Answer briefly."}]}
