"""Crash safety: SIGKILL a writer half-way through 10,000 memories while a second process writes beside it; every
write either of them reported survives."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.store.db import open_db

ROOT = Path(__file__).resolve().parents[1]
TOTAL = 10_000
KILL_AFTER = 2_500

WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from core.store.db import open_db
    from core.store.memories import add_memory
    import time
    db = open_db(sys.argv[2])
    name = sys.argv[4]
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    for n in range(int(sys.argv[3])):
        memory_id = add_memory(db, f"{name} memory number {n}", subject=f"item {n}", object="test")
        print(memory_id, n, flush=True)  # add_memory has committed when it returns
        time.sleep(pause)
""")


def _start(path: Path, total: int, name: str, pause: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(path), str(total), name, str(pause)],
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


WIPE_ROUNDS = 4  # forget-alls that may complete: each keeps a backup, and 5 are kept (core.store.db.BACKUPS_KEPT)


def _engram(data: Path, *argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app", "--data-dir", str(data), *argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _kill_after(process: subprocess.Popen, seconds: float) -> int:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        return process.wait(timeout=30)


def _statements(path: Path) -> set[str]:
    from core.store import health
    if not health.check_file(path).ok:
        return set()
    import apsw
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {row[0] for row in conn.execute("SELECT statement FROM memories")}
    finally:
        conn.close()


def test_sigkilled_forget_all_and_restore_lose_no_acknowledged_write_nor_restore_a_partial_file(tmp_path):
    """forget-all and doctor --restore killed at random moments beside a long-lived writer: every write the writer
    reported is in the store or, when a forget-all finished, in that forget-all's backup; backups/ never holds an
    incomplete file under a backup's name; and doctor never puts anything but a complete store in place."""
    import random

    from core.store import health
    rng = random.Random(37)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = data / "engram.db"
    open_db(path).close()
    writer = _start(path, TOTAL, "beside", pause=0.05)  # a chat's pace: room for a forget-all to finish
    acknowledged: list[str] = []
    outcomes = []
    try:
        for round_ in range(WIPE_ROUNDS * 2):
            for _ in range(40):  # writes between the killed commands
                memory_id, n = map(int, writer.stdout.readline().split())
                acknowledged.append(f"beside memory number {n}")
            argv = ("memory", "forget-all", "--confirm", "FORGET") if round_ % 2 == 0 else ("doctor", "--restore",
                                                                                           "--force")
            outcomes.append((argv[1], _kill_after(_engram(data, *argv), rng.uniform(0.2, 2.5))))
            for backup in (data / "backups").glob("engram-*.db"):
                assert health.check_file(backup).ok, f"round {round_}: {backup.name} is not a complete store"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    open_db(path).close()  # as the next command would: the killed writer's WAL folded in
    assert health.check_file(path).ok
    kept = _statements(path)
    for backup in (data / "backups").glob("engram-*.db"):
        kept |= _statements(backup)
    lost = [text for text in acknowledged if text not in kept]
    print(f"\n{len(acknowledged)} acknowledged writes, {len(lost)} lost; (command, exit) {outcomes}")
    assert lost == [], f"{len(lost)} acknowledged writes lost, first {lost[:3]}"
    assert not list(data.glob("engram.db.replaced-*")), "a store in use was replaced"


def test_a_sigkilled_restore_never_leaves_a_partial_store(tmp_path):
    """The store is lost (0 bytes); each `doctor --restore` is killed at a random moment: afterwards the store is
    either still the lost file or a complete store, and an unkilled restore then brings back every memory."""
    import random

    from core.memory.manage import MemoryManager
    from core.store import health, wipe
    from tests.fakes import HashEmbedder
    rng = random.Random(38)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = data / "engram.db"
    db = open_db(path)
    manager = MemoryManager(db, HashEmbedder())
    for n in range(300):
        manager.add(f"Memory number {n} about the user's garden and item {n}.")
    wipe.forget_everything(db, data / "backups")
    db.close()
    for round_ in range(6):
        path.write_bytes(b"")
        _kill_after(_engram(data, "doctor", "--restore"), rng.uniform(0.05, 1.5))
        assert path.stat().st_size == 0 or health.check_file(path).ok, f"round {round_}: a partial store"
    path.write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data), "doctor", "--restore"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(_statements(path)) == 300


def _workers_of(folder: Path) -> list[int]:
    """The fine-tuning workers whose config lies under `folder` (the data folder's runs)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            zombie = "zombie" in (entry / "status").read_text().lower()
        except OSError:
            continue
        if b"models.train_worker" in command and any(str(folder).encode() in part for part in command) \
                and not zombie:
            found.append(int(entry.name))
    return found


def test_a_sigkilled_fine_tune_leaves_the_store_sound_and_no_worker_running(tmp_path, tiny_model_dir):
    """`engram finetune now` killed while its worker trains, beside a writer: the worker stops with it, the store
    passes its checks, and every write the writer reported is there."""
    from core.memory.manage import MemoryManager
    from core.store import health
    from tests.fakes import HashEmbedder
    if not Path("/proc").is_dir():
        pytest.skip("finding the worker by its command line reads /proc")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = data / "engram.db"
    db = open_db(path)
    manager = MemoryManager(db, HashEmbedder())
    for n in range(12):
        manager.add(f"The user's fact number {n}: they like item {n} on Tuesdays.")
    from tests.finetune_store import say_standing_instructions
    say_standing_instructions(db)  # what a fine-tune learns from (how the user likes answers; facts are not)
    db.close()
    assert subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data), "models", "use", str(tiny_model_dir)],
                          cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    writer = _start(path, TOTAL, "beside", pause=0.05)
    tune = _engram(data, "finetune", "now")
    acknowledged = []
    deadline = time.monotonic() + 120
    while not _workers_of(data) and tune.poll() is None and time.monotonic() < deadline:
        memory_id, n = map(int, writer.stdout.readline().split())
        acknowledged.append(f"beside memory number {n}")
    assert _workers_of(data), f"the fine-tune never started its worker: {tune.poll()} {tune.stderr.read()[-800:]}"
    time.sleep(1.5)  # well into its work
    tune.send_signal(signal.SIGKILL)
    tune.wait(timeout=30)
    for _ in range(40):
        memory_id, n = map(int, writer.stdout.readline().split())
        acknowledged.append(f"beside memory number {n}")
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    deadline = time.monotonic() + 60
    while _workers_of(data) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _workers_of(data) == [], "the fine-tuning worker went on after `engram finetune now` was killed"
    open_db(path).close()
    assert health.check_file(path).ok
    kept = _statements(path)
    assert [text for text in acknowledged if text not in kept] == []
