"""Importing a large history from another assistant: `python -m bench.import_history [--turns 100000] [--json]`.

Builds a ChatGPT-shaped export (conversations.json inside a ZIP, each conversation a `mapping` tree with a branch
point, as ChatGPT writes it) of --conversations conversations and --turns turns. The words are real conversation:
the LoCoMo and BEAM turns in ../shared/data, recombined — each user message is one real turn with a second one's
sentence appended, and each reply another real turn — so 100,000 distinct turns exist from a few thousand.
Then, in a fresh process (so its peak resident memory is the import's own): `engram import chatgpt` through the
CLI, whole, on a fresh data folder. Reported: turns/s and the wall time, the child's peak RSS, the store's size,
then recall as a turn runs it (memories and turns, the query's embedding included) on the imported store, p50/p95
over --queries questions, against the same recall on an empty store as the baseline measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
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


def import_in_child(data_dir: Path, export: Path) -> dict:
    script = ("import resource, sys, time\nfrom app.cli.main import run_cli\nstart = time.perf_counter()\n"
              "code = run_cli(sys.argv[1:])\nprint('SECONDS', time.perf_counter() - start)\n"
              "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", script, "--data-dir", str(data_dir), "import", "chatgpt",
                           str(export)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"import failed: {done.stderr[-2000:]}")
    values = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("SECONDS", "PEAK")))
    return {"seconds": float(values["SECONDS"]), "peak_rss_mb": round(int(values["PEAK_KB"]) / 1024, 1),
            "said": [line for line in done.stdout.splitlines() if line.startswith("imported")]}


def recall_times(data_dir: Path, questions: list[str]) -> dict:
    from core.memory.recall import recall
    from core.store.db import open_db
    from models.embeddings import load_embedder
    embedder = load_embedder("all-MiniLM-L6-v2")
    db = open_db(data_dir / "engram.db")
    try:
        times = []
        for question in questions:
            start = time.perf_counter()
            recall(db, embedder, question, k=10)  # memories and turns; the query embedded each time
            times.append((time.perf_counter() - start) * 1000)
    finally:
        db.close()
    times.sort()
    return {"p50_ms": round(times[len(times) // 2], 2), "p95_ms": round(times[int(len(times) * 0.95) - 1], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = {**stamp("import_history"), "turns_asked": args.turns, "conversations": args.conversations}
    with tempfile.TemporaryDirectory(prefix="engram-import-bench-") as folder:
        work = Path(folder)
        export = work / "chatgpt-export.zip"
        result["turns"] = build_export(export, args.conversations, args.turns)
        result["export_mb"] = round(export.stat().st_size / 2**20, 1)
        child = import_in_child(work / "data", export)
        result.update(import_seconds=round(child["seconds"], 1), peak_rss_mb=child["peak_rss_mb"],
                      turns_per_s=round(result["turns"] / child["seconds"], 1), cli_said=child["said"])
        store = work / "data" / "engram.db"
        result["store_mb"] = round(sum(p.stat().st_size for p in store.parent.glob("engram.db*")) / 2**20, 1)
        questions = [line.split(". ")[0][:200] for line in random.Random(3).sample(real_turns(), args.queries)]
        empty = work / "empty"
        empty.mkdir()
        from core.store.db import open_db
        open_db(empty / "engram.db").close()
        result["recall_empty_store"] = recall_times(empty, questions)
        result["recall_imported_store"] = recall_times(work / "data", questions)
    result["load_average_1m_at_end"] = load_average()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
