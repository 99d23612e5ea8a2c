"""`engram doctor` and `--restore` (issue 37, item 1): an empty, half-written or foreign file is never "sound", a
backup is written under a temporary name and renamed only once it is complete and checked, a restore never puts
anything over a store that passes its checks unless told to (`--force`), and a sound store set aside is not called
"damaged"."""
from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import apsw

from app.cli.main import run_cli
from core.memory.manage import MemoryManager
from core.store import health, wipe
from core.store.db import backup, open_db
from tests.fakes import HashEmbedder


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def doctor(capsys, data: Path, *flags: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run_cli(["--data-dir", str(data), "doctor", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def store_after_forget_all(tmp_path: Path, memories: int = 3) -> tuple[Path, Path]:
    """A store with `memories` rows, forgotten (so its newest backup holds them), then two more added."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = data / "engram.db"
    db = open_db(path)
    manager = MemoryManager(db, HashEmbedder())
    for n in range(memories):
        manager.add(f"Before the wipe, memory {n}.")
    saved = wipe.forget_everything(db, data / "backups").backup
    manager.add("After the wipe, the user moved to Porto.")
    manager.add("After the wipe, the user adopted a cat.")
    db.checkpoint()
    db.close()
    return path, saved


def memory_count(path: Path) -> int:
    db = open_db(path)
    try:
        return db.scalar("SELECT count(*) FROM memories")
    finally:
        db.close()


def test_an_empty_backup_is_never_good_and_never_restored_over_a_healthy_store(tmp_path, capsys):
    path, saved = store_after_forget_all(tmp_path)
    saved.write_bytes(b"")  # the kill while forget-all wrote it, or a truncation by hand
    before = digest(path)
    code, out, _ = doctor(capsys, path.parent)
    assert code == 0 and "sound" in out
    assert f"{saved.name}  good" not in out and "empty" in out
    code, out, err = doctor(capsys, path.parent, "--restore")
    assert code == 1 and err.startswith("engram: ") and len(err.strip().splitlines()) == 1
    assert digest(path) == before and memory_count(path) == 2
    assert not list(path.parent.glob("engram.db.damaged-*"))


def test_a_half_written_backup_with_its_journal_is_not_good(tmp_path, capsys):
    path, saved = store_after_forget_all(tmp_path, memories=200)
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    Path(f"{saved}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 504)
    assert not health.check_file(saved).ok
    # the store is damaged: a restore would look for a good backup, and finds none
    path.write_bytes(b"")
    code, _, err = doctor(capsys, path.parent, "--restore")
    assert code == 1 and "no backup that passes" in err
    assert path.read_bytes() == b""


def test_an_empty_or_foreign_store_is_not_called_sound(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "engram.db"
    path.write_bytes(b"")
    code, out, _ = doctor(capsys, data)
    assert code == 1 and "sound" not in out and "empty" in out
    path.unlink()
    health.clear_marker(path)
    foreign = apsw.Connection(str(path))
    foreign.execute("CREATE TABLE recipes(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO recipes(name) VALUES ('x')")
    foreign.close()
    code, out, _ = doctor(capsys, data)
    assert code == 1 and "sound" not in out and "another application" in out


def test_restore_over_a_sound_store_asks_for_force_and_sets_it_aside_as_replaced(tmp_path, capsys):
    path, saved = store_after_forget_all(tmp_path)
    before = digest(path)
    code, _, err = doctor(capsys, path.parent, "--restore")
    assert code == 1 and "--force" in err and "passes" in err
    assert digest(path) == before
    code, out, _ = doctor(capsys, path.parent, "--restore", "--force")
    assert code == 0 and "Restored" in out
    assert memory_count(path) == 3
    asides = list(path.parent.glob("engram.db.*-2*"))
    assert {p.name.split("-")[0] for p in asides} == {"engram.db.replaced"}, asides
    assert not list(path.parent.glob("engram.db.damaged-*"))


def test_restore_over_an_empty_store_puts_the_good_backup_back(tmp_path, capsys):
    path, saved = store_after_forget_all(tmp_path)
    path.write_bytes(b"")
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    code, out, _ = doctor(capsys, path.parent, "--restore")
    assert code == 0 and "Restored" in out
    assert memory_count(path) == 3 and list(path.parent.glob("engram.db.damaged-*"))


def test_a_backup_is_renamed_into_place_only_once_complete_and_private(tmp_path, monkeypatch):
    path, _ = store_after_forget_all(tmp_path)
    folder = path.parent / "backups"
    before = set(folder.iterdir())
    db = open_db(path)
    seen: list[list[str]] = []
    real_check = health.check_file

    def look_then_check(candidate, **kwargs):
        seen.append(sorted(p.name for p in folder.iterdir() if p not in before))
        assert stat.S_IMODE(candidate.stat().st_mode) == 0o600
        return real_check(candidate, **kwargs)

    monkeypatch.setattr(health, "check_file", look_then_check)
    try:
        made = backup(db.conn, folder, label="test")
    finally:
        db.close()
    assert seen and all(not any(n.startswith("engram-") for n in names) for names in seen), seen
    assert made.exists() and health.check_file(made).ok
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert sorted(p.name for p in set(folder.iterdir()) - before) == [made.name]


def test_restore_refuses_while_another_process_has_the_store_open(tmp_path, capsys):
    import subprocess
    import sys
    path, _ = store_after_forget_all(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from core.store.db import open_db; "
                               f"db = open_db({str(path)!r}); print('ready', flush=True); sys.stdin.readline()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[1])  # the app, beside the command line
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = digest(path)
        code, _, err = doctor(capsys, path.parent, "--restore", "--force")
        assert code == 1 and "has the memory file open" in err and digest(path) == before
    finally:
        holder.communicate("\n", timeout=30)
    code, out, _ = doctor(capsys, path.parent, "--restore", "--force")
    assert code == 0 and "Restored" in out


def test_restore_reads_backups_newest_first_and_stops_at_the_first_good_one(tmp_path, capsys, monkeypatch):
    """Each check reads a whole copy (1.4 s CPU at 100k memories): the older backups are not read once one is good;
    a damaged newer one is passed over."""
    import os
    import shutil
    path, saved = store_after_forget_all(tmp_path)
    older, newest = saved.with_name("engram-older.db"), saved.with_name("engram-newest.db")
    shutil.copy2(saved, older)
    os.utime(older, (1, 1))
    newest.write_bytes(b"")  # damaged, and the newest
    path.write_bytes(b"")
    checked: list[str] = []
    real = health.check_file
    monkeypatch.setattr(health, "check_file", lambda p, **kw: checked.append(Path(p).name) or real(p, **kw))
    code, out, _ = doctor(capsys, path.parent, "--restore")
    assert code == 0 and f"Restored {saved.name}" in out and memory_count(path) == 3
    assert checked[:3] == ["engram.db", "engram-newest.db", saved.name]  # the store, then the newest first
    assert older.name not in checked  # (restore's own check of its copy follows)
