"""Finding the chat turns waiting to be learned, before and after migration 7: `python -m bench.pending_learning`.

The idle job (app.services.scheduling.plan and the reflection handler) asks for the waiting turns on every pass.
Before migration 7 that read every episode's JSON metadata (json_extract over the whole table); migration 7 adds
a partial index holding only the waiting turns. One store of N episodes (default 100,000; --pending of them
waiting, the newest, as a chat leaves them), built at schema 6: the query as it was is timed there (the baseline,
same run, same file), then the store is migrated (timed) and core.assistant.pending_learning is timed. Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import stamp  # noqa: E402
from core.assistant import pending_learning  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.migrations import MIGRATIONS  # noqa: E402

START = 1_700_000_000.0
# The query pending_learning ran before migration 7 (core/assistant.py at 4cbfcf8).
BEFORE_SQL = ("SELECT id FROM episodes WHERE json_extract(metadata, '$.learning') = ? AND deleted_at IS NULL "
              "AND forgotten_at IS NULL ORDER BY created_at, id LIMIT ?")


def build(path: Path, episodes: int, pending: int, reply_chars: int) -> None:
    db = open_db(path, migrations=MIGRATIONS[:6])
    rows = []
    for n in range(episodes):
        learning = "pending" if n >= episodes - pending else "done"
        metadata = json.dumps({"finish_reason": "stop", "intents": [], "dial": "normal", "learning": learning})
        reply = (f"reply {n}: " + "That sounds like a good plan for the week. " * reply_chars)[:reply_chars]
        rows.append((f"turn {n}: I went to the market and bought some apples and pears", reply,
                     START + n * 60.0, metadata))
    with db.transaction():
        db.conn.executemany("INSERT INTO episodes(user_text, assistant_text, created_at, metadata) "
                            "VALUES (?, ?, ?, ?)", rows)
    db.close()


def timed(work, repeats: int) -> dict:
    began = time.perf_counter()
    work()  # the first call on a fresh connection; the runs after it find the pages in SQLite's cache
    first = (time.perf_counter() - began) * 1000
    runs = []
    for _ in range(repeats):
        began = time.perf_counter()
        found = work()
        runs.append((time.perf_counter() - began) * 1000)
    runs.sort()
    return {"first_ms": round(first, 3), "median_ms": round(statistics.median(runs), 3),
            "p95_ms": round(runs[int(0.95 * (len(runs) - 1))], 3), "found": len(found)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=20)
    parser.add_argument("--reply-chars", type=int, default=600, help="each reply's length (a chat reply's)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    result = stamp("pending_learning")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "engram.db"
        began = time.perf_counter()
        build(path, args.episodes, args.pending, args.reply_chars)
        result["build_seconds"] = round(time.perf_counter() - began, 1)
        result["file_mb"] = round(path.stat().st_size / 1e6, 1)
        old = open_db(path, migrations=MIGRATIONS[:6])
        result["before"] = timed(lambda: old.execute(BEFORE_SQL, ("pending", 100)).fetchall(), args.repeats)
        result["before"]["plan"] = [r[3] for r in old.execute("EXPLAIN QUERY PLAN " + BEFORE_SQL, ("pending", 100))]
        old.close()
        began = time.perf_counter()
        new = open_db(path, backup_dir=Path(folder) / "backups")
        result["migration_seconds"] = round(time.perf_counter() - began, 2)  # the backup before it included
        result["after"] = timed(lambda: pending_learning(new), args.repeats)
        new.close()
    result.update(episodes=args.episodes, pending=args.pending, reply_chars=args.reply_chars,
                  speedup=round(result["before"]["median_ms"] / max(result["after"]["median_ms"], 1e-6), 1))
    assert result["before"]["found"] == result["after"]["found"] == min(args.pending, 100)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
