"""Learning quality on a gold set: `python -m bench.learning [--model FOLDER|smollm2] [--limit N] [--save [--out F]]
[--skip-alone] [--no-reflect] [--budget MINUTES]`.

Each statement of bench/learning_gold.py goes through Engram's real pipeline (core.assistant: prepare, finish
with a fixed reply, learn = extraction with its grounding filters, reconciliation, usefulness rating) on a
fresh store, once with the scripted model (tests.fakes: it answers with the gold facts and the right
reconciliation — the upper bound of the pipeline itself) and once with a real model if one is given. Then:

  precision   kept facts that match a gold fact / kept facts       (a match: subject and object match, the
  recall      gold facts matched by a kept fact / gold facts        relation is equivalent; see fact_matches)
  junk rate   kept facts that match no gold fact / kept facts       (must be 0 for every model)
  reconciliation accuracy   changed facts whose new value is active and old value is not / changed facts
  hypothesis precision      kept hypotheses that name a gold hypothesis / kept hypotheses, after every session
                            is reflected on (bench/learning_hypotheses.py; injected ones must be 0)

The reply is fixed, so the time measured per statement is learning's alone; reflection is timed apart. A real
model runs twice in one invocation: alone (", model alone": Settings.grounding.plain_facts off), then as the app
runs it, with the facts plainly said read without the model too (core.memory.said_facts).
`smollm2` is the SmolLM2-135M-Instruct the tests use (models.testing_real); any MLX folder works, e.g. Qwen3.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.learning_gold import GOLD, RELATION_GROUPS, Statement, Triple  # noqa: E402
from bench.learning_hypotheses import reflect_every_session, scripted_reflection  # noqa: E402
from bench.meta import stamp  # noqa: E402
from core.config import GenerationSettings, Settings  # noqa: E402
from core.memory.grounding import reason_counts  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "learning.json"
DROPPED_SHOWN = 60  # dropped facts listed with their reason in a run's result, so a refusal can be read
REPLY = "Thanks for telling me."
SETTINGS = Settings(generation=GenerationSettings(temperature=0.0, context_tokens=4096, engram_max_facts=3))
USER_WORDS = {"user", "i", "me", "my", "myself", "mine"}
ARTICLES = {"a", "an", "the", "user's", "s"}
_WORD = re.compile(r"\w+", re.UNICODE)


# -- the matcher -------------------------------------------------------------------------------------

def entity_words(text: str) -> set[str]:
    """Lower-case words without articles; any way of naming the user is 'user'."""
    words = {w for w in _WORD.findall(text.lower()) if w not in ARTICLES}
    if words and words <= USER_WORDS | {"the"}:
        return {"user"}
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


def entity_matches(predicted: str, gold: str) -> bool:
    said, wanted = entity_words(predicted), entity_words(gold)
    if not said or not wanted:
        return False
    return wanted <= said or said <= wanted


def relation_key(relation: str) -> str:
    return re.sub(r"[^\w]+", "_", relation.lower()).strip("_")


def relation_matches(predicted: str, gold: str) -> bool:
    a, b = relation_key(predicted), relation_key(gold)
    if not a or not b:
        return False
    if a == b or any(a in group and b in group for group in RELATION_GROUPS):
        return True
    grouped = any(a in group or b in group for group in RELATION_GROUPS)
    return not grouped and bool(set(a.split("_")) & set(b.split("_")))


def fact_matches(predicted: Triple, gold: Triple) -> bool:
    """Same subject, same object (one's words within the other's), and an equivalent relation."""
    return (entity_matches(predicted[0], gold[0]) and entity_matches(predicted[2], gold[2])
            and relation_matches(predicted[1], gold[1]))


def score(kept: Sequence[tuple[Triple, bool]], statements: Sequence[Statement]) -> dict[str, Any]:
    """Metrics for the facts a run kept (each with whether it is still active) against the statements said."""
    gold = [fact for s in statements for fact in s.facts]
    matched = [triple for triple, _ in kept if any(fact_matches(triple, g) for g in gold)]
    found = [g for g in gold if any(fact_matches(triple, g) for triple, _ in kept)]
    changes = [s for s in statements if s.ends]
    right = [s for s in changes if _change_applied(s, kept)]
    return {
        "kept": len(kept), "matched": len(matched), "gold_facts": len(gold),
        "precision": _ratio(len(matched), len(kept)), "recall": _ratio(len(found), len(gold)),
        "junk_rate": _ratio(len(kept) - len(matched), len(kept), empty=0.0),
        "junk": [list(t) for t, _ in kept if not any(fact_matches(t, g) for g in gold)],
        "changes": len(changes), "reconciliation_accuracy": _ratio(len(right), len(changes)),
    }


def _change_applied(statement: Statement, kept: Sequence[tuple[Triple, bool]]) -> bool:
    active = [t for t, is_active in kept if is_active]
    new_is_active = all(any(fact_matches(t, f) for t in active) for f in statement.facts)
    old_is_closed = not any(fact_matches(t, old) for t in active for old in statement.ends)
    return new_is_active and old_is_closed


def _ratio(part: int, whole: int, *, empty: float | None = None) -> float | None:
    return round(part / whole, 3) if whole else empty


# -- the scripted upper bound ----------------------------------------------------------------------------

def sentence(triple: Triple) -> str:
    subject = "The user" if triple[0] == "user" else triple[0]
    return f"{subject} {triple[1].replace('_', ' ')} {triple[2]}."


def scripted_model(statements: Sequence[Statement]) -> Any:
    """Answers extraction with the gold facts of the statement in the prompt, reconciliation with the gold change."""
    from tests.fakes import ScriptedStructuredModel

    def facts(messages, schema) -> dict:
        body = messages[-1].content
        said = max((s for s in statements if s.text in body), key=lambda s: len(s.text), default=None)
        limit = schema["properties"]["facts"].get("maxItems", 3)
        return {"facts": [_fact_item(t) for t in (said.facts if said else ())][:limit]}

    def reconcile(messages, schema) -> dict:
        body = messages[-1].content
        new = body.split("<<<NEW\n", 1)[1].split("\nNEW>>>", 1)[0]
        stored = re.findall(r"^(\d+)\. (.*)$", body.split("<<<STORED\n", 1)[1], re.MULTILINE)
        ended = {sentence(old) for s in statements for old in s.ends if sentence(s.facts[0]) == new}
        for number, text in stored:
            if text in ended:
                return {"decision": "contradiction", "target": int(number), "reason": "the gold change"}
            if text == new:
                return {"decision": "duplicate", "target": int(number), "reason": "the same fact"}
        return {"decision": "new", "target": 0, "reason": "nothing like it stored"}

    return ScriptedStructuredModel({"engram_facts": facts, "reconcile_decision": reconcile,
                                    "usefulness_rating": [{"useful": []}], **scripted_reflection()})


def _fact_item(triple: Triple) -> dict:
    return {"subject": triple[0], "relation": triple[1], "object": triple[2], "statement": sentence(triple),
            "confidence": 90, "kind": "semantic", "critical": triple[1] in ("allergy", "medication"),
            "source": "user_said", "when": ""}


# -- a run ---------------------------------------------------------------------------------------------

def run(name: str, chat: Any, structured: Any, embedder: Any, statements: Sequence[Statement],
        settings: Settings = SETTINGS, *, reflect: bool = True, budget: float = 0.0) -> dict[str, Any]:
    """Say every statement on a fresh store (until `budget` seconds of learning are spent, when it is not 0: the
    run is then scored on the statements said); score what the store holds at the end."""
    from core.assistant import Assistant
    from core.store.db import open_db
    from core.store.memories import list_memories
    from core.store.sessions import create_session, end_session

    clock = _Clock()
    with tempfile.TemporaryDirectory(prefix="engram-learning-") as folder:
        db = open_db(Path(folder) / "engram.db", clock=clock)
        try:
            assistant = Assistant(db, embedder, chat, structured, settings, clock)
            dropped, errors, seconds, session, current = [], [], [], None, None
            for statement in statements:
                if budget and sum(seconds) >= budget:
                    break
                if statement.session != current:
                    if session is not None:
                        end_session(db, session)
                    clock.now += 86400.0
                    session, current = create_session(db, title=f"session {statement.session}"), statement.session
                clock.now += 600.0
                started = time.perf_counter()
                record = assistant.finish(assistant.prepare(session, statement.text), REPLY)
                report = assistant.learn(record)
                seconds.append(time.perf_counter() - started)
                print(f"[{name}] {len(seconds)}/{len(statements)} {seconds[-1]:.1f}s kept {len(report.facts)} "
                      f"dropped {len(report.dropped)}: {statement.text[:50]}", file=sys.stderr, flush=True)
                dropped += [(statement.text, item, why) for item, why in report.dropped]
                errors.extend(report.errors)
            if session is not None:
                end_session(db, session)
            statements = statements[:len(seconds)]
            reflection = reflect_every_session(db, settings, structured, embedder, [s.text for s in statements]) \
                if reflect else {"reflection": "not run (--no-reflect)"}
            kept = [((m.subject, m.relation, m.object), m.is_active) for m in list_memories(db, status=None,
                                                                                            limit=100_000)]
        finally:
            db.close()
    result = {"model": name, "statements": len(statements), **score(kept, statements), "dropped": len(dropped),
              "dropped_reasons": reason_counts(why for _, _, why in dropped),
              "dropped_facts": [[text, *(str(item.get(k, "")) for k in ("subject", "relation", "object")), why]
                                for text, item, why in dropped][:DROPPED_SHOWN],
              "errors": errors[:10], "error_count": len(errors),
              "seconds_per_statement": round(sum(seconds) / max(len(seconds), 1), 2),
              "seconds": round(sum(seconds), 1), **reflection}
    return result


class _Clock:
    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        return self.now


def _real_model(spec: str) -> tuple[str, Any, Any]:
    from models.chat import ChatEngine
    from models.structured import StructuredGenerator
    if spec == "smollm2":
        from models.testing_real import build_real_model
        folder, name = build_real_model(), "SmolLM2-135M-Instruct (Q4_1 GGUF, 8-bit MLX)"
    else:
        folder = Path(spec).expanduser()
        name = folder.name
    engine = ChatEngine.load(folder, context_tokens=SETTINGS.generation.context_tokens)
    return name, engine, StructuredGenerator(engine)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an MLX model folder, or 'smollm2' for the packaged test model")
    parser.add_argument("--limit", type=int, default=0, help="only the first N statements (0: all)")
    parser.add_argument("--save", action="store_true", help=f"merge the result into {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--out", type=Path, help="with --save: this results file instead (one per model)")
    parser.add_argument("--skip-alone", action="store_true",
                        help="run a real model only as the app runs it, not also alone (half the time)")
    parser.add_argument("--no-reflect", action="store_true", help="skip reflecting on the sessions (hypotheses)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="minutes of learning a real-model run may take; it is scored on what it said by then")
    args = parser.parse_args(argv)
    statements = GOLD[: args.limit] if args.limit > 0 else GOLD
    header = stamp("learning")  # the load average before the runs share the cores
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # as the app does, before mlx loads: float32 matmuls on OpenBLAS, not MLX's reference one

    from models.embeddings import load_embedder
    from tests.fakes import ScriptedChatModel
    embedder = load_embedder(SETTINGS.embedder)
    reflect, budget = not args.no_reflect, 60.0 * args.budget
    runs = [run("scripted", ScriptedChatModel([REPLY]), scripted_model(statements), embedder, statements)]
    if args.model:  # the model alone first, the baseline in this run: facts plainly said are not read without it
        name, engine, structured = _real_model(args.model)
        alone = SETTINGS.replace(grounding=dataclasses.replace(SETTINGS.grounding, plain_facts=False))
        try:
            if not args.skip_alone:
                runs.append(run(f"{name}, model alone", engine, structured, embedder, statements, alone,
                                reflect=reflect, budget=budget))
            runs.append(run(name, engine, structured, embedder, statements, reflect=reflect, budget=budget))
        finally:
            engine.unload()
    result = {**header, "limit": args.limit, "gold_statements": len(GOLD),
              "runs": {r["model"]: r for r in runs}}
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.save:
        _save(result, args.out or RESULTS)
    return 0


def _save(result: dict[str, Any], path: Path = RESULTS) -> None:
    """Keep earlier runs of other models (a long run of a larger model is not repeated every time)."""
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    runs = {**saved.get("runs", {}), **{name: {**r, "date": result["date"], "limit": result["limit"],
                                               "commit": result["commit"]} for name, r in result["runs"].items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "runs": runs}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
