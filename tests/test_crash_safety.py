"""Crash safety: SIGKILL a writer half-way through 10,000 memories; every write it reported survives."""
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
    for n in range(int(sys.argv[3])):
        memory_id = add_memory(db, f"crash test memory number {n}", subject=f"item {n}", object="test")
        print(memory_id, flush=True)  # add_memory has committed when it returns
""")


def test_sigkill_mid_write_loses_no_reported_write(tmp_path):
    path = tmp_path / "engram.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(path), str(TOTAL)],
                             stdout=subprocess.PIPE, text=True)
    reported = []
    try:
        for line in child.stdout:
            reported.append(int(line))
            if len(reported) >= KILL_AFTER:
                os.kill(child.pid, signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert len(reported) == KILL_AFTER

    db = open_db(path)
    try:
        assert db.scalar("PRAGMA integrity_check") == "ok"
        stored = {row[0] for row in db.execute("SELECT id FROM memories")}
        assert set(reported) <= stored
        assert len(stored) < TOTAL, "the writer must have died in the middle"
        assert db.scalar("SELECT count(*) FROM memory_history WHERE action = 'create'") == len(stored)
        db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        last = max(reported)
        assert db.scalar("SELECT statement FROM memories WHERE id = ?", (last,)) == \
            f"crash test memory number {last - 1}"
    finally:
        db.close()
