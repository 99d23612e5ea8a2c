"""Importing a large history from another assistant: `python -m bench.import_history [--turns 100000] [--json]`.

Builds a ChatGPT-shaped export (conversations.json inside a ZIP, each conversation a `mapping` tree with a branch
point, as ChatGPT writes it) of --conversations conversations and --turns turns. The words are real conversation:
the LoCoMo and BEAM turns in ../shared/data, recombined — each user message is one real turn with a second one's
sentence appended, and each reply another real turn — so 100,000 distinct turns exist from a few thousand.
Then, in a fresh process (so its peak resident memory is the import's own): `engram import chatgpt` through the
CLI on a fresh data folder, whole, or stopped with Ctrl-C after --minutes (what it wrote stays; the same command
resumes). Reported: turns/s and the wall time (the reading of the export apart), the child's peak RSS, the store's
size, then recall as the window's turn runs it (memories and turns, k = 10) on the imported store, with the query's
embedding and alone, p50/p95 over --queries questions, against the same recall on an empty store bound to the same
embedder as the baseline measured in the same run.

--work DIR keeps the export and the store in DIR, so the archive can be imported in chunks of --minutes each (the
importer resumes after Ctrl-C); DIR/runs.json keeps every chunk's time, turns and peak RSS, and the JSON sums them.
--no-recall leaves the recall timing for the last chunk; --recall-only times it on the store in DIR, importing nothing.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import load_average, stamp  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
T0 = 1_600_000_000.0


def real_turns(limit: int = 50_000) -> list[str]:
    """Conversation lines from LoCoMo and BEAM (whatever JSON they hold: every string value of a 'text' or
    'content' key), deduplicated."""
    found: list[str] = []
    for path in sorted(DATA.glob("**/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        _collect(data, found, limit)
        if len(found) >= limit:
            break
    return list(dict.fromkeys(t for t in found if 20 <= len(t) <= 600))


def _collect(node: object, found: list[str], limit: int) -> None:
    stack = [node]
    while stack and len(found) < limit:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("text", "content", "clean_text") and isinstance(value, str):
                    found.append(value.strip())
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def build_export(path: Path, conversations: int, turns: int, seed: int = 7) -> int:
    lines = real_turns()
    if len(lines) < 100:
        raise SystemExit(f"too little real text under {DATA} ({len(lines)} lines)")
    rng = random.Random(seed)
    per = max(1, turns // conversations)
    items, made = [], 0
    for c in range(conversations):
        count = per if c < conversations - 1 else turns - made
        items.append(_conversation(c, count, lines, rng))
        made += count
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", json.dumps(items))
    return made


def _conversation(c: int, count: int, lines: list[str], rng: random.Random) -> dict:
    start = T0 + c * 7200.0
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for t in range(count):
        question = f"{rng.choice(lines)} {rng.choice(lines).split('. ')[0]}"
        for role, text, node in (("user", question, f"u{t}"), ("assistant", rng.choice(lines), f"a{t}")):
            mapping[node] = {"id": node, "parent": parent, "children": [], "message": {
                "id": node, "author": {"role": role}, "create_time": start + t * 60 + (role == "assistant"),
                "content": {"content_type": "text", "parts": [text]}, "metadata": {}}}
            mapping[parent]["children"].append(node)
            parent = node
    return {"title": f"Conversation {c}", "create_time": start, "update_time": start + count * 60,
            "mapping": mapping, "current_node": parent, "conversation_id": f"bench-{c}"}


def import_in_child(data_dir: Path, export: Path, minutes: float | None) -> dict:
    """`engram import chatgpt` in a fresh process; stopped with Ctrl-C (SIGINT, as a person would) after
    `minutes`, when given: what it imported by then stays, and the same command resumes it."""
    script = ("import resource, sys, time\nfrom app.cli.main import run_cli\nstart = time.perf_counter()\n"
              "code = run_cli(sys.argv[1:])\nprint('SECONDS', time.perf_counter() - start)\n"
              "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\nsys.exit(code)\n")
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", script, "--data-dir", str(data_dir), "import", "chatgpt",
                              str(export)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if minutes is not None:
        timer = threading.Timer(minutes * 60, child.send_signal, (signal.SIGINT,))
        timer.start()
    lines, read_at = [], None
    for line in child.stdout:  # the CLI says "read …" once the whole export is parsed and checked
        lines.append(line.rstrip("\n"))
        if line.startswith("read ") and read_at is None:
            read_at = time.perf_counter() - start
    error = child.stderr.read()
    code = child.wait()
    if minutes is not None:
        timer.cancel()
    if code not in (0, 130):
        raise SystemExit(f"import failed: {error[-2000:]}")
    values = dict(line.split(" ", 1) for line in lines if line.startswith(("SECONDS", "PEAK")))
    return {"seconds": float(values["SECONDS"]), "peak_rss_mb": round(int(values["PEAK_KB"]) / 1024, 1),
            "read_seconds": round(read_at or 0.0, 1), "stopped": code == 130,
            "said": [line for line in lines if line.startswith(("read", "imported", "stopped"))]}


def recall_times(stores: dict[str, Path], questions: list[str], embedder) -> dict:
    """Recall as the window's turn runs it (memories and turns, k = 10) on each store, a question at a time on each
    in turn (a busy machine's drift falls on both alike): with the query's embedding, and alone (the questions
    embedded beforehand), p50/p95 in ms."""
    from bench.recall import _forget_query
    from core.memory.index import Precomputed
    from core.memory.recall import recall
    from core.store.db import open_db
    ready = Precomputed.of(embedder, questions)
    dbs = {name: open_db(folder / "engram.db") for name, folder in stores.items()}
    timed: dict[str, dict[str, list[float]]] = {name: {"with_embedding": [], "alone": []} for name in stores}
    try:
        for question in questions[:5]:  # warm: the stores' pages, the encoder's weights
            for db in dbs.values():
                recall(db, embedder, question, k=10)
        for question in questions:
            for name, db in dbs.items():
                for way, used in (("with_embedding", embedder), ("alone", ready)):
                    _forget_query(embedder, question)  # each question a new message: its embedding not cached
                    start = time.perf_counter()
                    recall(db, used, question, k=10)
                    timed[name][way].append((time.perf_counter() - start) * 1000)
    finally:
        for db in dbs.values():
            db.close()
    return {name: {way: _percentiles(times) for way, times in ways.items()} for name, ways in timed.items()}


def _percentiles(times: list[float]) -> dict:
    times = sorted(times)
    return {"p50_ms": round(times[len(times) // 2], 2), "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--minutes", type=float, help="stop the import (Ctrl-C) after this long; what it wrote stays")
    parser.add_argument("--work", type=Path, help="keep the export and the store here: a later run resumes the import")
    parser.add_argument("--no-recall", action="store_true", help="skip timing recall (a chunk before the last)")
    parser.add_argument("--recall-only", action="store_true", help="import nothing more: time recall on --work's store")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = {**stamp("import_history"), "turns_asked": args.turns, "conversations": args.conversations}
    with tempfile.TemporaryDirectory(prefix="engram-import-bench-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        result["turns"] = _export(work, args.turns, args.conversations)
        export = work / "chatgpt-export.zip"
        result["export_mb"] = round(export.stat().st_size / 2**20, 1)
        if args.recall_only and (work / "runs.json").is_file():
            runs = json.loads((work / "runs.json").read_text())
        else:
            before = _turns_in(work / "data")
            child = import_in_child(work / "data", export, args.minutes)
            runs = _ledger(work, {**child, "turns_before": before, "turns_after": _turns_in(work / "data"),
                                  "load_at_start": result["load_average_1m_at_start"], "load_at_end": load_average()})
        result.update(_imported(work / "data", result["turns"], runs))
        if not args.no_recall:
            questions = [line.split(". ")[0][:200] for line in random.Random(3).sample(real_turns(), args.queries)]
            result["recall_empty_store"], result["recall_imported_store"] = _recall_both(
                work / "data", Path(scratch) / "empty", questions)
    result["load_average_1m_at_end"] = load_average()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


def _export(work: Path, turns: int, conversations: int) -> int:
    """The export in `work`, built once: a later run with the same sizes imports the very same file (same batch)."""
    export, sizes = work / "chatgpt-export.zip", work / "export.json"
    wanted = {"turns": turns, "conversations": conversations}
    if export.is_file() and sizes.is_file() and json.loads(sizes.read_text())["asked"] == wanted:
        return int(json.loads(sizes.read_text())["turns"])
    made = build_export(export, conversations, turns)
    sizes.write_text(json.dumps({"asked": wanted, "turns": made}))
    (work / "runs.json").unlink(missing_ok=True)
    return made


def _turns_in(data_dir: Path) -> int:
    from core.store.db import open_db
    if not (data_dir / "engram.db").is_file():
        return 0
    db = open_db(data_dir / "engram.db")
    try:
        return int(db.scalar("SELECT count(*) FROM episodes"))
    finally:
        db.close()


def _ledger(work: Path, run: dict) -> list[dict]:
    """Every import run into this work folder so far, this one last."""
    path = work / "runs.json"
    runs = json.loads(path.read_text()) if path.is_file() else []
    runs.append({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **run})
    path.write_text(json.dumps(runs, indent=1))
    return runs


def _imported(data_dir: Path, turns: int, runs: list[dict]) -> dict:
    """This run's figures, and the sums over every run (chunk) that built this store."""
    from core.store import vectors
    from core.store.db import open_db
    db = open_db(data_dir / "engram.db")
    try:
        done = int(db.scalar("SELECT count(*) FROM episodes"))
        with_vectors = done - len(vectors.ids_without_vectors(db, "episode"))
    finally:
        db.close()
    last = runs[-1]
    added = sum(run["turns_after"] - run["turns_before"] for run in runs)
    seconds = sum(run["seconds"] for run in runs)
    writing = max(sum(run["seconds"] - run["read_seconds"] for run in runs), 1e-9)
    rate = added / writing
    return {"complete": done == turns, "turns_imported": done, "turns_with_vectors": with_vectors,
            "runs": len(runs), "import_seconds": round(seconds, 1), "read_seconds": last["read_seconds"],
            "turns_per_s": round(added / seconds, 1), "turns_per_s_writing": round(rate, 1),
            "this_run": {"turns": last["turns_after"] - last["turns_before"], "seconds": round(last["seconds"], 1),
                         "turns_per_s": round((last["turns_after"] - last["turns_before"]) / last["seconds"], 1),
                         "load": [last["load_at_start"], last["load_at_end"]]},
            "projected_seconds_for_all": round(last["read_seconds"] + turns / rate, 0) if added else None,
            "peak_rss_mb": max(run["peak_rss_mb"] for run in runs), "stopped_after_minutes": last["stopped"],
            "cli_said": last["said"],
            "store_mb": round(sum(p.stat().st_size for p in data_dir.glob("engram.db*")) / 2**20, 1)}


def _recall_both(imported: Path, empty: Path, questions: list[str]) -> tuple[dict, dict]:
    """Recall on an empty store bound to the same embedder (the baseline: the query's embedding and recall's fixed
    cost), then on the imported store."""
    from core.memory.index import ensure_bound
    from core.store.db import open_db
    from models.embeddings import load_embedder
    embedder = load_embedder("all-MiniLM-L6-v2", lasting=True)  # the window's: a turn's recall runs in the app
    empty.mkdir()
    db = open_db(empty / "engram.db")
    try:
        ensure_bound(db, embedder)
    finally:
        db.close()
    times = recall_times({"empty": empty, "imported": imported}, questions, embedder)
    return times["empty"], times["imported"]


if __name__ == "__main__":
    raise SystemExit(main())
