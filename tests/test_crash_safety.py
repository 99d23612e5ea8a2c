"""Crash safety: SIGKILL a writer half-way through 10,000 memories while a second process writes beside it; every
write either of them reported survives."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from core.store.db import open_db

ROOT = Path(__file__).resolve().parents[1]
TOTAL = 10_000
KILL_AFTER = 2_500

WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from core.store.db import open_db
    from core.store.memories import add_memory
    db = open_db(sys.argv[2])
    name = sys.argv[4]
    for n in range(int(sys.argv[3])):
        memory_id = add_memory(db, f"{name} memory number {n}", subject=f"item {n}", object="test")
        print(memory_id, n, flush=True)  # add_memory has committed when it returns
""")


def _start(path: Path, total: int, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(path), str(total), name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_mid_write_loses_no_reported_write(tmp_path):
    path = tmp_path / "engram.db"
    open_db(path).close()  # both writers open an existing store
    beside = _start(path, TOTAL, "beside")
    child = _start(path, TOTAL, "crash test")
    reported: dict[int, int] = {}
    try:
        for line in child.stdout:
            memory_id, n = map(int, line.split())
            reported[memory_id] = n
            if len(reported) >= KILL_AFTER:
                os.kill(child.pid, signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait(timeout=30)
    beside_out, beside_err = beside.communicate(timeout=600)
    assert beside.returncode == 0, beside_err  # never a 'database is locked' beside the killed writer
    beside_reported = dict(tuple(map(int, line.split())) for line in beside_out.splitlines())
    assert child.returncode == -signal.SIGKILL
    assert len(reported) == KILL_AFTER and len(beside_reported) == TOTAL

    db = open_db(path)
    try:
        assert db.scalar("PRAGMA integrity_check") == "ok"
        stored = {row[0]: row[1] for row in db.execute("SELECT id, statement FROM memories")}
        for name, acknowledged in (("crash test", reported), ("beside", beside_reported)):
            for memory_id, n in acknowledged.items():
                assert stored.get(memory_id) == f"{name} memory number {n}"
        crashed = sum(1 for text in stored.values() if text.startswith("crash test"))
        assert crashed < TOTAL, "the writer must have died in the middle"
        assert db.scalar("SELECT count(*) FROM memory_history WHERE action = 'create'") == len(stored)
        db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    finally:
        db.close()
