"""End-to-end answer quality: `python -m bench.answers --model FOLDER|scripted|tiny [--dataset locomo|beam]
[--limit N] [--conversations M] [--learn patterns|model] [--save]`.

Each conversation (bench/answers_data.py) is fed turn by turn into a fresh store through the product's own turn
pipeline (core.assistant: prepare, finish with the conversation's own reply, learn: stored, embedded, and learned
from — `--learn patterns` with the plain-statement learner only (core.memory.said_facts; the model is given no
learning call, so extraction and reconciliation fall back as they do when a model fails), `--learn model` with the
model as the app learns). The ingested store is cached by its inputs (the conversation's text, the learn mode, the
embedder, the learning model) so a second run reuses it. Then each question is asked as a new chat turn in a new
session, through Assistant.prepare and Assistant.stream, with the same model as reader, in four conditions:

  engram     the product as it runs: memory dial normal (recall, facts, quoted turns)
  none       memory dial off: the model alone
  truncated  memory dial off, the whole conversation as the chat history, cut to the model's window newest first
             by the product's own context assembly: what a plain chat app does
  gold       the data set's evidence turns only, quoted exactly as Engram quotes a recalled turn: a perfect retriever

Scores (bench/answers_score.py): LoCoMo token F1 per category against the original and the audit's corrected
answers; abstention accuracy (LoCoMo's adversarial, BEAM's abstention questions); knowledge-update accuracy and
BEAM per ability by a deterministic rubric proxy; evidence recall: the share of the question's evidence turns that
reached the prompt. Per-question records and the time each answer took are saved.
`scripted` is an extractive reader (the context line sharing most words with the question, else "I don't know"):
it measures what reached the prompt, with no model; `tiny` is the random-weight model of models/testing.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import answers_score as scoring  # noqa: E402
from bench.answers_data import Dialogue, Probe, load_beam, load_locomo, spread  # noqa: E402
from bench.answers_store import MutableClock, StoreCache, ingested  # noqa: E402
from bench.answers_summary import failure_causes, summarise  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402
from core.config import GenerationSettings, Settings  # noqa: E402
from core.prompts.answer import MEMORY_CLOSING  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CONDITIONS = ("engram", "none", "truncated", "gold")
ASK_ORDER = ("none", "engram", "gold", "truncated")  # the window-filling truncated prompts last: on a slow machine
# a run cut short has Engram's answers (with the cheap no-memory ones) rather than only the costliest baseline's
RESULTS = ROOT / "bench" / "results"
DEFAULT_CACHE = Path("~/.cache/engram-bench/answers")
MAX_TOKENS = {"locomo": 48, "beam": 160}  # LoCoMo wants a short phrase; BEAM's rubric needs a few sentences


@dataclasses.dataclass
class Reader:
    name: str
    chat: Any
    structured: Any  # for --learn model; None: no model learning
    close: Callable[[], None] = lambda: None


def settings_for(dataset: str, context_tokens: int) -> Settings:
    return Settings(generation=GenerationSettings(temperature=0.0, max_tokens=MAX_TOKENS[dataset],
                                                  context_tokens=context_tokens))


def run(dialogues: list[Dialogue], reader: Reader, embedder: Any, *, learn: str = "patterns", limit: int = 0,
        conditions: tuple[str, ...] = CONDITIONS, cache: StoreCache, context_tokens: int = 4096,
        log: Callable[[str], None] = lambda _: None,
        on_record: Callable[[list[dict[str, Any]]], None] = lambda _: None,
        done: dict[str, dict[str, Any]] | None = None, stop_at: float | None = None,
        tag: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ingest (or reuse) each dialogue's store, ask its questions in every condition, score and summarise;
    `on_record` sees the records so far after each question (a long run saves as it goes). A question in `done`
    (records of an earlier run with the same settings, by id) is kept, not asked again; once time.monotonic()
    passes `stop_at` no new question is asked and the result says it is not complete (a later run resumes it).
    `tag` is written into each new answer (e.g. the commit that answered it). A question's conditions are asked
    one condition at a time over the dialogue's questions; a record cut short holds the conditions it has."""
    records: list[dict[str, Any]] = []
    ingest_seconds: dict[str, float] = {}
    done, complete = done or {}, True
    for turn, dialogue in enumerate(dialogues):
        probes = spread(dialogue.probes, limit, turn)
        mine = {p.id: dict(done.get(p.id) or _record(dialogue, p)) for p in probes}
        kept = len(records)
        asking = [(c, p) for c in sorted(conditions, key=ASK_ORDER.index) for p in probes if c not in mine[p.id]]
        if asking and stop_at is not None and time.monotonic() > stop_at:
            complete = False
            asking = []
        if asking:
            so_far = _saver(on_record, records[:kept], mine, conditions)
            complete &= _ask_all(dialogue, asking, mine, reader, embedder, learn, context_tokens, cache, log,
                                 ingest_seconds, stop_at, tag or {}, so_far)
        records += _answered(mine.values(), conditions)
    return {"learn": learn, "model": reader.name, "conditions": list(conditions), "limit_per_conversation": limit,
            "context_tokens": context_tokens, "ingest_seconds": ingest_seconds, "complete": complete,
            "resumed": sum(1 for r in records if r["id"] in done),
            "unfinished": sum(1 for r in records if any(c not in r for c in conditions)),
            "summary": summarise(records, conditions),
            "engram_failures": failure_causes(records) if "engram" in conditions else {}, "questions": records}


def _ask_all(dialogue: Dialogue, asking: list[tuple[str, Probe]], mine: dict[str, dict[str, Any]], reader: Reader,
             embedder: Any, learn: str, context_tokens: int, cache: StoreCache, log: Callable[[str], None],
             ingest_seconds: dict[str, float], stop_at: float | None, tag: dict[str, Any],
             saved: Callable[[], None]) -> bool:
    """Ask the dialogue's missing (condition, question) pairs, a condition's questions one after another (the
    model's prompt cache keeps what consecutive prompts share: the window-filling history of `truncated`, as a
    chat app keeps its conversation's); False when time ran out first."""
    from core.assistant import Assistant
    from core.store.sessions import create_session

    settings = settings_for(dialogue.dataset, context_tokens)
    learner = reader.structured if learn == "model" else None
    began = time.perf_counter()
    store = ingested(dialogue, embedder, reader.chat, learner, learn, settings, cache, log)
    ingest_seconds[dialogue.name] = round(time.perf_counter() - began, 1)
    clock = MutableClock(dialogue.asked_at)
    db = store.open(clock)
    try:
        assistant = Assistant(db, embedder, reader.chat, None, settings, clock)
        session = create_session(db, "questions", created_at=clock())
        for condition, probe in asking:
            if stop_at is not None and time.monotonic() > stop_at:
                return False
            answer = _answer(condition, assistant, session, dialogue, probe, store)
            mine[probe.id][condition] = {**answer, **tag}
            saved()
            log(f"{probe.id} [{probe.category}] {condition} {answer['seconds']:.1f}s "
                f"(reused {answer.get('reused_tokens', 0)} of {answer['prompt_tokens']}) {answer['reply'][:60]!r}")
    finally:
        db.close()
    return True


def _record(dialogue: Dialogue, probe: Probe) -> dict[str, Any]:
    return {"id": probe.id, "dataset": dialogue.dataset, "conversation": dialogue.name, "category": probe.category,
            "question": probe.question, "answer": probe.answer, "corrected": probe.corrected,
            "evidence": sorted(probe.evidence), "abstain": probe.abstain, "update": probe.update}


def _saver(on_record: Callable[[list[dict[str, Any]]], None], before: list[dict[str, Any]],
           mine: dict[str, dict[str, Any]], conditions: tuple[str, ...]) -> Callable[[], None]:
    return lambda: on_record(before + _answered(mine.values(), conditions))


def _answered(records: Any, conditions: tuple[str, ...]) -> list[dict[str, Any]]:
    """The records that have at least one condition's answer."""
    return [r for r in records if any(c in r for c in conditions)]


def _answer(condition: str, assistant: Any, session: int, dialogue: Dialogue, probe: Probe,
            store: Any) -> dict[str, Any]:
    started = time.perf_counter()
    prepared, seen = _prepared(condition, assistant, session, dialogue, probe, store)
    reply = "".join(chunk.text for chunk in assistant.stream(prepared))
    seconds = time.perf_counter() - started
    answer = {"reply": reply, "seconds": round(seconds, 2), "prompt_tokens": prepared.context_tokens,
              "seen": sorted(seen), **_scores(probe, reply, seen)}
    reused = getattr(assistant.chat, "last_reused_tokens", None)
    if isinstance(reused, int):
        answer["reused_tokens"] = reused  # prompt tokens served from the model's prompt cache
    if condition == "engram":
        answer["memories"] = [m.text for m in prepared.used]
    return answer


def _prepared(condition: str, assistant: Any, session: int, dialogue: Dialogue, probe: Probe,
              store: Any) -> tuple[Any, set[str]]:
    """The prepared turn of a condition, and the data set's ids of the turns its prompt holds."""
    if condition == "engram":
        prepared = assistant.prepare(session, probe.question)
        episodes = set(prepared.used_episodes) | set(store.sources_of([m.id for m in prepared.used]))
        return prepared, store.ids_of(episodes)
    if condition == "none":
        return assistant.prepare(session, probe.question, dial="off"), set()
    if condition == "truncated":
        history = [(t.user, t.reply) for t in dialogue.turns]
        prepared = assistant.prepare(session, probe.question, dial="off", history=history)
        kept = (len(prepared.messages) - 2) // 2  # the newest turns that fit, between the system and the question
        return prepared, {i for t in dialogue.turns[len(dialogue.turns) - kept:] for i in t.ids} if kept else set()
    return gold_prepared(assistant, probe, store), set(probe.corrected_evidence or probe.evidence)


def gold_prepared(assistant: Any, probe: Probe, store: Any) -> Any:
    """The evidence turns as recall would have quoted them, assembled by the product's context code."""
    from core.assistant import PreparedTurn
    from core.memory.context import ContextItem, ContextParts, CountedTokens, assemble
    from core.memory.dates import iso_day

    now = assistant.clock()
    items = [ContextItem("episode", episode, text, "gold evidence", at=at)
             for episode, text, at in store.quoted(probe.corrected_evidence or probe.evidence)]
    g = assistant.settings.generation
    budget = max(min(g.context_tokens, int(getattr(assistant.chat, "context_window", g.context_tokens)))
                 - g.max_tokens, 0)
    parts = ContextParts(user_text=probe.question, today=iso_day(now), recalled=items)
    built = assemble(parts, CountedTokens(assistant.chat.count_tokens), budget)
    return PreparedTurn(None, probe.question, tuple(built.messages), (), now, context_tokens=built.tokens)


def _scores(probe: Probe, reply: str, seen: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"evidence_recall": scoring.evidence_recall(probe.evidence, seen),
                           "abstained": scoring.abstains(reply)}
    if probe.abstain:
        out["correct"] = out["abstained"]
    if probe.id.startswith("locomo"):
        if not probe.abstain:
            out["f1"] = round(scoring.locomo_f1(reply, probe.answer, probe.category), 4)
            out["f1_corrected"] = round(scoring.locomo_f1(reply, probe.corrected or probe.answer, probe.category), 4)
        return out
    if not probe.abstain and probe.rubric:
        out["rubric"] = round(scoring.rubric_score(reply, probe.rubric), 4)
        if probe.category == "event_ordering":
            out["order"] = round(scoring.order_score(reply, probe.rubric), 4)
        if probe.update:
            out["correct"] = out["rubric"] >= 1.0
    return out


# ---- readers ------------------------------------------------------------------------------------------

def extractive_reply(messages: list[Any]) -> str:
    """The scripted reader: the context line sharing most content words with the question, else "I don't know"."""
    question = scoring._content(messages[-1].content)
    lines = [re.sub(r"^\[[em]\d+[^\]]*\]\s*", "", line) for m in messages[:-1]
             for line in m.content.splitlines()
             if line.strip() and not line.startswith(("<<<", "You are Engram", "Said on ", MEMORY_CLOSING))]
    best = max(lines, key=lambda line: len(question & scoring._content(line)), default="")
    return best if best and question & scoring._content(best) else "I don't know."


def load_reader(spec: str, context_tokens: int, work: Path) -> Reader:
    if spec == "scripted":
        from tests.fakes import ScriptedChatModel
        return Reader("scripted (extractive)", ScriptedChatModel(extractive_reply), None)
    from models.chat import ChatEngine
    from models.structured import StructuredGenerator
    if spec == "tiny":
        from models.testing import build_tiny_model
        folder = work / "tiny-4bit"
        if not (folder / "config.json").is_file():
            build_tiny_model(folder)
        name = "tiny (random weights)"
    else:
        folder = Path(spec).expanduser()
        name = folder.name
    engine = ChatEngine.load(folder, context_tokens=context_tokens)
    return Reader(name, engine, StructuredGenerator(engine), engine.unload)


def load_dialogues(dataset: str, data: Path, conversations: int) -> list[Dialogue]:
    if dataset == "locomo":
        found = load_locomo(data / "locomo" / "locomo-dev.json", data / "locomo" / "audit-dev.json")
    else:
        found = load_beam(data / "beam")
    return found[:conversations] if conversations > 0 else found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="scripted", help="an MLX model folder (a converted GGUF), "
                                                             "'scripted' or 'tiny'")
    parser.add_argument("--dataset", choices=("locomo", "beam"), default="locomo")
    parser.add_argument("--data", type=Path, default=DATA, help="the folder holding locomo/ and beam/")
    parser.add_argument("--limit", type=int, default=0, help="questions per conversation, spread over categories")
    parser.add_argument("--conversations", type=int, default=0, help="only the first M conversations (0: all)")
    parser.add_argument("--learn", choices=("patterns", "model"), default="patterns")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--context-tokens", type=int, default=4096, help="the reader's window (all conditions)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where ingested stores are kept")
    parser.add_argument("--save", action="store_true", help="write bench/results/answers-<model>-<dataset>.json")
    parser.add_argument("--resume", action="store_true", help="keep the questions the saved result (same model, "
                                                               "data set, learn mode, conditions, window) answered")
    parser.add_argument("--minutes", type=float, default=0.0, help="ask no new question after this many minutes "
                                                                   "(0: no limit); --resume goes on from there")
    parser.add_argument("--out", type=Path, default=None, help="the result file (default bench/results/"
                                                               "answers-<model>-<dataset>.json)")
    args = parser.parse_args(argv)
    conditions = tuple(c for c in args.conditions.split(",") if c)
    if not conditions or any(c not in CONDITIONS for c in conditions):
        parser.error(f"--conditions takes some of {', '.join(CONDITIONS)}")
    if args.model not in ("scripted", "tiny") and not (Path(args.model).expanduser() / "config.json").is_file():
        parser.error(f"{args.model} is not a model folder (no config.json); convert a GGUF first")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # before mlx loads, as the app does (Linux: MLX's CPU wheel links a slow reference BLAS)
    args.save = args.save or args.out is not None  # naming the result file is asking for it to be written
    header = stamp("answers")
    from models.embeddings import load_embedder
    embedder = load_embedder(Settings().embedder, lasting=True)
    cache = StoreCache(args.cache.expanduser())
    reader = load_reader(args.model, args.context_tokens, cache.folder)
    slug = re.sub(r"[^a-z0-9.]+", "-", reader.name.lower()).strip("-")
    target = args.out or RESULTS / f"answers-{slug}-{args.dataset}.json"
    extra = {"dataset": args.dataset, "learn": args.learn, "model": reader.name, "conditions": list(conditions),
             "context_tokens": args.context_tokens}
    done = resumable(target, extra) if args.resume else {}
    if done:
        log(f"resuming: {len(done)} questions already answered in {target.name}")
    stop_at = time.monotonic() + 60.0 * args.minutes if args.minutes > 0 else None

    def partial(records: list[dict[str, Any]]) -> None:
        if args.save:  # what a run cut short had measured stays readable
            _write(target, {**header, **extra, "partial": True, "summary": summarise(records, conditions),
                            "questions": records})
    try:
        result = run(load_dialogues(args.dataset, args.data, args.conversations), reader, embedder,
                     learn=args.learn, limit=args.limit, conditions=conditions, cache=cache,
                     context_tokens=args.context_tokens, log=log, on_record=partial, done=done, stop_at=stop_at,
                     tag={"commit": header["commit"]})
    finally:
        reader.close()
    result = {**header, "dataset": args.dataset, "load_average_1m_at_end": load_average(), **result,
              **({} if result["complete"] else {"partial": True})}
    if args.save:
        _write(target, result)
    print(json.dumps({k: v for k, v in result.items() if k != "questions"}, indent=1))
    return 0


def resumable(path: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The questions a saved result answered, by id, when it was run with the same settings; else none."""
    if not path.is_file():
        return {}
    saved = json.loads(path.read_text(encoding="utf-8"))
    if any(saved.get(key) != value for key, value in settings.items()):
        return {}
    return {record["id"]: record for record in saved.get("questions", [])}


def _write(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
