"""Preference following with and without the fine-tuned adapter, with and without memory (issue 42).

    python bench/finetune.py --preferences [--model FOLDER | --pypi KEY] [--limit N] [--no-sft] [--out FILE]

One user store holds every preference of the run, each said once as a standing instruction in its own earlier
turn: a PrefEval explicit preference (dev topics, ../shared/data/prefeval), a BEAM preference-following or
instruction-following question's preference_being_tested / instruction_being_tested (conversations 1-10), and the
style instructions core.finetune.styles recognises ("metric units", "no emojis", ...). Engram's own nightly path
(dataset builder, recipe, training process, gate) trains one adapter from that store; it learns only the
preferences it can demonstrate (styles), which is reported. Then every question is answered in four conditions on
the same base model: no memory (the question alone, after the same filler turns); memory (Engram's answer prompt
with the relevant preference in its style section, as a recalled note); the adapter alone; adapter + memory.
Greedy decoding, MAX_TOKENS new tokens, BATCH prompts at a time.

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
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from core.finetune import adapters as versions
from core.finetune.dataset import build_training_set
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
BATCH = 16  # prompts generated together (greedy either way)
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


def answer_all(model_dir: str, cases: list[dict], adapter: str | None) -> dict[str, list[str]]:
    """Greedy replies for every case, without and with memory, on the base model or base + adapter: all prompts in
    one batch (mlx-lm's batch_generate; on a CPU a batch of replies costs little more than one)."""
    from mlx_lm import batch_generate
    from mlx_lm.tuner.utils import load_adapters

    from models.train_worker import _load
    model, tokenizer = _load({"model": model_dir})
    if adapter:
        load_adapters(model, adapter)
    model.eval()
    tail = filler()
    conditions = (("no_memory", False), ("memory", True))
    prompts = [list(tokenizer.apply_chat_template(prompt(case, with_memory, tail), add_generation_prompt=True))
               for case in cases for _, with_memory in conditions]
    replies, started = [], time.perf_counter()
    for start in range(0, len(prompts), BATCH):
        replies += batch_generate(model, tokenizer, prompts[start:start + BATCH], max_tokens=MAX_TOKENS).texts
        print(f"{'adapter' if adapter else 'base'}: {len(replies)}/{len(prompts)} replies, "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)  # a long run shows it moves
    return {name: replies[n::len(conditions)] for n, (name, _) in enumerate(conditions)}


def train_adapter(db: Any, model_dir: str, folder: Path) -> dict:
    """Engram's own nightly path (recipe from the data's size); the adapter is scored whether the gate took it."""
    from bench.finetune import gate_run
    versions.rollback_to_base(db)
    started = time.perf_counter()
    adapter = gate_run(db, model_dir, folder, None)
    return {"adapter": adapter, "seconds": round(time.perf_counter() - started, 1)}


def sft_comparison(db: Any, model_dir: str, folder: Path, training: Any) -> dict:
    """The same recipe with the plain loss only: does the preference-pair term earn its place? (gate measures)"""
    from dataclasses import replace

    from bench.finetune import gate_run
    from models.finetune import config_from_recipe
    versions.rollback_to_base(db)
    adapter = gate_run(db, model_dir, folder, replace(config_from_recipe(training), objective="sft"))
    m = adapter.metrics
    return {"status": adapter.status, "probe_loss": m["candidate"]["probe_loss"],
            "probe_loss_by_kind": m["probe_loss_by_kind"]["candidate"],
            "preference_margin": m["preference_margin"]["candidate"], "general_ppl": m["candidate"]["general_ppl"],
            "known_fact_loss": m["candidate"]["known_fact_loss"]}


def summarise(cases: list[dict], replies: dict[str, list[str]]) -> dict:
    out: dict[str, Any] = {}
    for name in ("prefeval", "beam", "styles"):
        picked = [i for i, c in enumerate(cases) if c["set"] == name]
        if picked:
            out[name] = {condition: round(sum(score(cases[i], rs[i]) for i in picked) / len(picked), 3)
                         for condition, rs in replies.items()}
            out[name]["questions"] = len(picked)
    return out


def run(model_dir: str, label: str, prefeval: int, beam: int, *, styles: int | None = None,
        sft: bool = True) -> dict:
    cases = prefeval_cases(prefeval) + beam_cases(beam) + style_cases(styles)
    db = user_store(cases)
    training = build_training_set(db)
    result: dict[str, Any] = {"model": label, "cases": len(cases), "training_examples": training.size,
                              "preference_pairs": len(training.pairs), "styles_learned": training.styles,
                              "preferences_without_demonstration": len(cases) - len(training.episode_ids)}
    with tempfile.TemporaryDirectory() as tmp:
        trained = train_adapter(db, model_dir, Path(tmp) / "adapters")
        adapter = trained["adapter"]
        m = adapter.metrics
        result["adapter"] = {"status": adapter.status, "gate": m["gate"]["reasons"], "config": dict(adapter.config),
                             "steps": m["iters"], "train_and_score_seconds": trained["seconds"],
                             "general_ppl": {"base": m["baseline"]["general_ppl"],
                                             "adapter": m["candidate"]["general_ppl"]},
                             "known_fact_loss": {"base": m["baseline"]["known_fact_loss"],
                                                 "adapter": m["candidate"]["known_fact_loss"]},
                             "probe_loss": {"base": m["baseline"]["probe_loss"],
                                            "adapter": m["candidate"]["probe_loss"]},
                             "preference_margin": m.get("preference_margin")}
        print(f"adapter {adapter.status} after {trained['seconds']} s: " + "; ".join(m["gate"]["reasons"]),
              file=sys.stderr, flush=True)
        if sft:
            result["plain_sft_same_recipe"] = sft_comparison(db, model_dir, Path(tmp) / "sft", training)
        started = time.perf_counter()
        base = answer_all(model_dir, cases, None)
        tuned = answer_all(model_dir, cases, adapter.path)
        result["generation_seconds"] = round(time.perf_counter() - started, 1)
    replies = {"no_memory": base["no_memory"], "memory": base["memory"], "adapter": tuned["no_memory"],
               "adapter_memory": tuned["memory"]}
    result["scores"] = summarise(cases, replies)
    result["examples"] = [{"case": c, **{k: v[i][:300] for k, v in replies.items()}}
                          for i, c in enumerate(cases) if c["set"] == "styles"][:4]
    return result


def settings() -> dict:
    return {"filler_pairs": FILLER_PAIRS, "filler_chars": FILLER_CHARS, "max_tokens": MAX_TOKENS, "batch": BATCH,
            "general_text_sentences": len(GENERAL_TEXT), "known_facts": len(KNOWN_FACTS), "decoding": "greedy"}


__all__ = ["run", "settings", "score", "asdict"]
