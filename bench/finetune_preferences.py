"""Preference following with and without the fine-tuned adapter, with and without memory (issue 42).

    python -m bench.finetune --preferences [--model FOLDER | --pypi KEY] [--limit N] [--no-sft] [--out FILE]
                             [--resume DIR] [--minutes M]

One user store holds every preference of the run, each said once as a standing instruction in its own earlier
turn: a PrefEval explicit preference (dev topics, ../shared/data/prefeval), a BEAM preference-following or
instruction-following question's preference_being_tested / instruction_being_tested (conversations 1-10), and the
style instructions core.finetune.styles recognises ("metric units", "no emojis", ...). Engram's own nightly path
(dataset builder, recipe, training process, gate) trains one adapter from that store; it learns only the
preferences it can demonstrate (styles), which is reported. Then every question is answered in four conditions on
the same base model: no memory (the question alone, after the same filler turns); memory (Engram's answer prompt
with the relevant preference in its style section, as a recalled note); the adapter alone; adapter + memory.
Greedy decoding, MAX_TOKENS new tokens. The run itself (resumable, in chunks: bench/finetune_preferences_run.py)
answers a few questions at a time in all four conditions and saves after each chunk.

Deterministic scoring (no model judges, least of all the one under test):
- PrefEval: "preference-aware" = the reply names a distinctive word of the preference (>= 5 letters, not in the
  question, not a stopword; compared by their first 5 letters). A lexical stand-in for the authors' "acknowledge"
  judgement; it cannot see a violation, so it is not their accuracy.
- BEAM: a rubric item ("LLM response should contain: X") passes when at least half of X's content words (>= 4
  letters, by first 5 letters) are in the reply; question score = mean over its items (the authors' judge, not this).
- Styles (held-out situations, core.finetune.styles PROBE prompts): each style's own check (metric units present
  and no imperial ones; at most 25 words; no emoji; numbered lines; a British spelling from a word list and no
  American one; Python; a contraction, exclamation or casual word and no formal one).
Beside them: plain-text perplexity and known-fact loss (core.finetune.gate) of base and adapter, the gate's verdict.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from core.finetune.gate import GENERAL_TEXT, KNOWN_FACTS
from core.finetune.styles import STYLES
from core.prompts.answer import IDENTITY, style_section
from core.store.db import open_memory_db
from core.store.episodes import add_episode

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PREFEVAL_DEV = ("education_learning_styles", "education_resources", "entertain_games", "entertain_music_book",
                "entertain_shows", "entertain_sports", "lifestyle_beauty", "lifestyle_dietary", "lifestyle_fit",
                "lifestyle_health")
FILLER_PAIRS, FILLER_CHARS = 2, 300
MAX_TOKENS = 64
STOPWORDS = set("about after again against because before being below between could doing during other their "
                "there these those through under until while which would should always never prefer really "
                "things something response mention mentions including include includes specific using".split())
IMPERIAL = re.compile(r"\b(miles?|feet|foot|pounds?|lbs?|inch(es)?|°F|fahrenheit)\b", re.IGNORECASE)
METRIC = re.compile(r"(km|kilomet|metre|meter|°C|celsius|kilogram|\bkg\b)", re.IGNORECASE)
_SPELLINGS = (("colour", "color"), ("favourite", "favorite"), ("organis", "organiz"), ("centre", "center"),
              ("analys", "analyz"), ("theatre", "theater"), ("realis", "realiz"), ("behaviour", "behavior"),
              ("recognis", "recogniz"), ("travell", "travel(?!l)"), ("flavour", "flavor"), ("neighbour", "neighbor"))
BRITISH = re.compile(r"\b(" + "|".join(b for b, _ in _SPELLINGS) + ")", re.IGNORECASE)
AMERICAN = re.compile(r"\b(" + "|".join(a for _, a in _SPELLINGS) + ")", re.IGNORECASE)
INFORMAL = re.compile(r"\w'(s|re|ve|ll|t)\b|!|\b(nice|aw|oh|handy|loads|stuff|bit|like|kinda|sorry)\b", re.I)
FORMAL = re.compile(r"\b(acknowledged|utili[sz]|furthermore|thus|hence|acquisition|component|encrypted|"
                    r"examination|subsequent|eroding|execution|recommended|overlay|purchasing)", re.I)
EMOJI = re.compile("[\U0001F300-\U0001FAFF\u2600-\u27BF]")
STYLE_CHECKS: dict[str, Callable[[str], bool]] = {
    "metric_units": lambda r: bool(METRIC.search(r)) and not IMPERIAL.search(r),
    "short_answers": lambda r: len(r.split()) <= 25,
    "no_emojis": lambda r: not EMOJI.search(r),
    "numbered_steps": lambda r: len(re.findall(r"(?m)^\s*\d+[.)]\s", r)) >= 2,
    "british_spelling": lambda r: bool(BRITISH.search(r)) and not AMERICAN.search(r),
    "python_examples": lambda r: "python" in r.lower() or bool(re.search(r"\bdef |import |print\(", r)),
    "informal_tone": lambda r: bool(INFORMAL.search(r)) and not FORMAL.search(r),
}


def _words(text: str, shortest: int) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= shortest and w not in STOPWORDS}


def prefeval_cases(limit: int) -> list[dict]:
    """Round-robin over the dev topics, so a small subset spans them all."""
    topics = [json.loads((DATA / "prefeval" / "explicit_preference" / f"{t}.json").read_text()) for t in PREFEVAL_DEV]
    cases = []
    for n in range(max(len(t) for t in topics)):
        for name, rows in zip(PREFEVAL_DEV, topics):
            if n < len(rows) and len(cases) < limit:
                cases.append({"set": "prefeval", "topic": name, "preference": rows[n]["preference"],
                              "question": rows[n]["question"]})
    return cases


def beam_cases(limit: int) -> list[dict]:
    cases = []
    for n in range(1, 11):
        probing = json.loads((DATA / "beam" / str(n) / "probing_questions.json").read_text())
        for category, field in (("preference_following", "preference_being_tested"),
                                ("instruction_following", "instruction_being_tested")):
            for q in probing[category]:
                cases.append({"set": "beam", "category": category, "preference": q[field], "question": q["question"],
                              "rubric": [r.split(":", 1)[-1].strip() for r in q["rubric"]]})
    by_kind = [[c for c in cases if c["category"] == k] for k in ("preference_following", "instruction_following")]
    picked = [c for pair in zip(*by_kind) for c in pair]  # alternate the two categories
    return picked[:limit]


def style_cases(limit: int | None = None) -> list[dict]:
    """Each style's held-out PROBE situations, round-robin over the styles (a small subset spans them all)."""
    instruction = {"metric_units": "Use metric units from now on.", "short_answers": "Shorter answers, please.",
                   "no_emojis": "No emojis from now on.", "numbered_steps": "Always give numbered steps.",
                   "british_spelling": "Always use British spelling.",
                   "python_examples": "Always give code examples in Python.",
                   "informal_tone": "Always keep a warm, informal tone without jargon."}
    rounds = max(len(s.probes) for s in STYLES)
    cases = [{"set": "styles", "style": s.name, "preference": instruction[s.name], "question": s.probes[n].prompt}
             for n in range(rounds) for s in STYLES if n < len(s.probes)]
    return cases if limit is None else cases[:limit]


def filler() -> list[dict]:
    chats = json.loads((DATA / "prefeval" / "filtered_inter_turns.json").read_text())
    messages = [m for chat in chats for m in chat["conversation"]][:2 * FILLER_PAIRS]
    return [{"role": m["role"], "content": m["content"][:FILLER_CHARS]} for m in messages]


def score(case: dict, reply: str) -> float:
    if case["set"] == "styles":
        return float(STYLE_CHECKS[case["style"]](reply))
    if case["set"] == "prefeval":
        distinctive = _words(case["preference"], 5) - _words(case["question"], 5)
        return float(bool(distinctive & _words(reply, 5)))
    said = _words(reply, 4)
    items = [(_words(item, 4), item) for item in case["rubric"]]
    return sum(len(w & said) >= max(1, len(w) / 2) for w, _ in items) / max(1, len(items))


def user_store(cases: list[dict]):
    """One user who said each preference once, in its own turn (what Engram's nightly fine-tune reads)."""
    db = open_memory_db()
    for case in cases:
        add_episode(db, case["preference"], "Noted.")
    return db


def prompt(case: dict, with_memory: bool, tail: list[dict]) -> list[dict]:
    system = IDENTITY + ("\n\n" + style_section("What the user confirmed about themselves:\n- " + case["preference"])
                         if with_memory else "")
    return [{"role": "system", "content": system}, *tail, {"role": "user", "content": case["question"]}]


def summarise(cases: list[dict], replies: dict[str, list[str]]) -> dict:
    """Mean score per set and condition (and per style: the adapter can only move those), same questions in all."""
    out: dict[str, Any] = {}
    for name in ("prefeval", "beam", "styles"):
        picked = [i for i, c in enumerate(cases) if c["set"] == name]
        if picked:
            out[name] = _means(cases, replies, picked)
    styles = sorted({c["style"] for c in cases if c["set"] == "styles"})
    if styles:
        out["by_style"] = {s: _means(cases, replies, [i for i, c in enumerate(cases) if c.get("style") == s])
                           for s in styles}
    return out


def _means(cases: list[dict], replies: dict[str, list[str]], picked: list[int]) -> dict:
    means: dict[str, Any] = {condition: round(sum(score(cases[i], rs[i]) for i in picked) / len(picked), 3)
                             for condition, rs in replies.items()}
    return {**means, "questions": len(picked)}


def settings() -> dict:
    return {"filler_pairs": FILLER_PAIRS, "filler_chars": FILLER_CHARS, "max_tokens": MAX_TOKENS,
            "general_text_sentences": len(GENERAL_TEXT), "known_facts": len(KNOWN_FACTS), "decoding": "greedy"}


__all__ = ["settings", "score", "asdict"]
