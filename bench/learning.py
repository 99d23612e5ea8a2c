"""Learning quality on a gold set: `python -m bench.learning [--model FOLDER|smollm2] [--limit N] [--save [--out F]]
[--skip-alone] [--no-reflect] [--budget MINUTES] [--resume FOLDER]`.

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
A run longer than one hold of a shared machine: `--budget 25 --resume FOLDER`, then the same command again, which
goes on from the first statement not said (each run's store and progress are kept in FOLDER).
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
        settings: Settings = SETTINGS, *, reflect: bool = True, budget: float = 0.0,
        resume: Path | None = None) -> dict[str, Any]:
    """Say every statement on a fresh store (until `budget` seconds of learning are spent, when it is not 0: the
    run is then scored on the statements said); score what the store holds at the end. With `resume` (a folder),
    the store and what was said are kept there, one folder a run, and a later call goes on from the first
    statement not said yet (a long run split into holds of a shared machine)."""
    from core.store.db import open_db
    from core.store.memories import list_memories

    with tempfile.TemporaryDirectory(prefix="engram-learning-") as scratch:
        folder = Path(scratch) if resume is None else resume / relation_key(name)
        folder.mkdir(parents=True, exist_ok=True)
        progress = Progress.load(folder / PROGRESS)
        progress.check(statements, folder)
        clock = _Clock(progress.now)
        db = open_db(folder / "engram.db", clock=clock)
        try:
            _say(name, db, clock, chat, structured, embedder, statements, settings, progress, budget, folder)
            said = statements[:progress.said]
            done = progress.said >= len(statements)
            reflection = reflect_every_session(db, settings, structured, embedder, [s.text for s in said]) \
                if reflect and done else {"reflection": "not run" + (" (--no-reflect)" if not reflect else
                                                                     " (not every statement said yet)")}
            kept = [((m.subject, m.relation, m.object), m.is_active) for m in list_memories(db, status=None,
                                                                                            limit=100_000)]
        finally:
            db.close()
    dropped = progress.dropped
    return {"model": name, "statements": len(said), "complete": done, **score(kept, said), "dropped": len(dropped),
            "dropped_reasons": reason_counts(why for _, _, why in dropped),
            "dropped_facts": [[text, *(str(item.get(k, "")) for k in ("subject", "relation", "object")), why]
                              for text, item, why in dropped][:DROPPED_SHOWN],
            "errors": progress.errors[:10], "error_count": len(progress.errors),
            "asked_model_for_facts": progress.asked_model,
            "seconds_per_statement": round(sum(progress.seconds) / max(len(progress.seconds), 1), 2),
            "seconds": round(sum(progress.seconds), 1), "holds": progress.holds, **reflection}


PROGRESS = "progress.json"


@dataclasses.dataclass
class Progress:
    """What a run has said so far, kept beside its store (bench/learning.py --resume)."""
    said: int = 0
    now: float = 1_780_000_000.0
    session: int | None = None
    current: int | None = None  # the gold session the open store session belongs to
    seconds: list[float] = dataclasses.field(default_factory=list)
    dropped: list[list[Any]] = dataclasses.field(default_factory=list)  # [statement, raw fact, why]
    errors: list[str] = dataclasses.field(default_factory=list)
    asked_model: int = 0  # statements whose extraction asked the model (core.memory.unread)
    holds: int = 0
    texts: list[str] = dataclasses.field(default_factory=list)  # the statements said, in order

    def check(self, statements: Sequence[Statement], folder: Path) -> None:
        """A resumed run goes on with the statements it began with: another --limit (or gold set) would score
        the store's facts against statements it was not told, or tell it some twice."""
        wanted = [s.text for s in statements[:self.said]]
        if self.said > len(statements) or (self.texts and self.texts != wanted):
            raise ValueError(f"{folder} holds a run of other statements ({self.said} said; this run has "
                             f"{len(statements)}): use the same --limit, or a new --resume folder")

    @classmethod
    def load(cls, path: Path) -> "Progress":
        return cls(**json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else cls()

    def save(self, path: Path) -> None:
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(dataclasses.asdict(self), ensure_ascii=False), encoding="utf-8")
        partial.replace(path)


def _say(name: str, db: Any, clock: "_Clock", chat: Any, structured: Any, embedder: Any,
         statements: Sequence[Statement], settings: Settings, progress: Progress, budget: float,
         folder: Path) -> None:
    """Say the statements not said yet, saving the progress after each (the store has committed it by then)."""
    from core.assistant import Assistant
    from core.store.sessions import create_session, end_session

    assistant = Assistant(db, embedder, chat, structured, settings, clock)
    progress.holds += 1
    spent = 0.0
    for statement in statements[progress.said:]:
        if budget and spent >= budget:
            break
        if statement.session != progress.current:
            if progress.session is not None:
                end_session(db, progress.session)
            clock.now += 86400.0
            progress.session, progress.current = create_session(db, title=f"session {statement.session}"), \
                statement.session
        clock.now += 600.0
        started = time.perf_counter()
        report = assistant.learn(assistant.finish(assistant.prepare(progress.session, statement.text), REPLY))
        progress.seconds.append(time.perf_counter() - started)
        spent += progress.seconds[-1]
        progress.said += 1
        progress.texts.append(statement.text)
        progress.now = clock.now
        progress.asked_model += report.asked_model
        progress.dropped += [[statement.text, item, why] for item, why in report.dropped]
        progress.errors.extend(report.errors)
        if progress.said == len(statements):
            end_session(db, progress.session)
        progress.save(folder / PROGRESS)
        print(f"[{name}] {progress.said}/{len(statements)} {progress.seconds[-1]:.1f}s kept {len(report.facts)} "
              f"dropped {len(report.dropped)}{' (model asked)' if report.asked_model else ''}: "
              f"{statement.text[:50]}", file=sys.stderr, flush=True)


class _Clock:
    def __init__(self, now: float = 1_780_000_000.0) -> None:
        self.now = now

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
    parser.add_argument("--resume", type=Path,
                        help="keep each run's store and progress in this folder; a second call goes on from there")
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except ValueError as error:  # a resumed folder that does not fit: one line, nothing changed
        print(f"error: {error}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    statements = GOLD[: args.limit] if args.limit > 0 else GOLD
    header = stamp("learning")  # the load average before the runs share the cores
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # as the app does, before mlx loads: float32 matmuls on OpenBLAS, not MLX's reference one

    from models.embeddings import load_embedder
    from tests.fakes import ScriptedChatModel
    embedder = load_embedder(SETTINGS.embedder)
    reflect, budget = not args.no_reflect, 60.0 * args.budget
    resume = args.resume
    runs = [run("scripted", ScriptedChatModel([REPLY]), scripted_model(statements), embedder, statements,
                resume=resume)]
    if args.model:  # the model alone first, the baseline in this run: facts plainly said are not read without it
        name, engine, structured = _real_model(args.model)
        alone = SETTINGS.replace(grounding=dataclasses.replace(SETTINGS.grounding, plain_facts=False))
        try:
            if not args.skip_alone:
                runs.append(run(f"{name}, model alone", engine, structured, embedder, statements, alone,
                                reflect=reflect, budget=budget, resume=resume))
            runs.append(run(name, engine, structured, embedder, statements, reflect=reflect, budget=budget,
                            resume=resume))
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
