"""Every command-line failure ends in one `engram: …` line and a non-zero exit; what it prints is terminal-safe;
values of the wrong type or range are refused at the API and import boundary with nothing changed."""
from __future__ import annotations

import errno
import hashlib
import json
import math
import stat
from pathlib import Path

import apsw
import pytest

from app.cli.main import LOG_NAME, run_cli
from app.cli.terminal import printable
from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.store.db import open_db
from tests.fakes import HashEmbedder

HOSTILE = "Ana\x1b]0;pwned\x07 lives in \x1b[31mLisbon\u202egnp.exe\u2066 \r\x08"


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    data = tmp_path / "data"
    assert run_cli(["--data-dir", str(data), "memory", "add", HOSTILE]) == 0
    capsys.readouterr()
    return data


def _one_line_failure(capsys, code: int) -> str:
    err = capsys.readouterr().err
    assert code != 0, err
    assert err.startswith("engram: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv", [
    ("memory", "show", str(2**63)),
    ("memory", "pin", "1", str(2**64)),
    ("memory", "list", "--limit", "99999999999999999999"),
    ("memory", "search", "x", "-k", "-3"),
    ("memory", "add", "x", "--confidence", "nan"),
    ("memory", "add", "x", "--confidence", "inf"),
    ("jobs", "list", "--limit", "1e9"),
    ("hypotheses", "confirm", "-1"),
    ("memory", "add", "\u200b\u200c\u0301\u0301"),  # only zero-width and combining marks
])
def test_out_of_range_and_invisible_input_is_one_line_and_changes_nothing(folder, capsys, argv):
    before = _digest(folder)
    _one_line_failure(capsys, run_cli(["--data-dir", str(folder), *argv]))
    assert _digest(folder) == before


def test_an_import_nested_a_hundred_thousand_deep_is_one_line(folder, tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    before = _digest(folder)
    _one_line_failure(capsys, run_cli(["--data-dir", str(folder), "memory", "import", str(deep)]))
    assert _digest(folder) == before


@pytest.mark.parametrize("error, words", [
    (OSError(errno.ENOSPC, "No space left on device"), "disk is full"),
    (PermissionError(errno.EACCES, "Permission denied", "/some/file"), "Permission denied: /some/file"),
    (OverflowError("int too large"), "too large"),
    (RecursionError("deep"), "nested too deeply"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not valid UTF-8"),
    (MemoryError(), "not enough memory"),
    (apsw.BusyError("database is locked"), "busy: another Engram process is writing"),
    (apsw.FullError("database or disk is full"), "disk is full"),
    (apsw.ReadOnlyError("attempt to write a readonly database"), "read-only"),
    (apsw.CorruptError("database disk image is malformed"), "engram doctor"),
    (KeyError("surprise"), "--debug"),
])
def test_an_unexpected_failure_is_described_in_one_line(folder, capsys, monkeypatch, error, words):
    def fail(*args, **kwargs):
        raise error
    monkeypatch.setattr("core.memory.manage.MemoryManager.list", fail)
    err = _one_line_failure(capsys, run_cli(["--data-dir", str(folder), "memory", "list"]))
    assert words in err


def test_engram_debug_shows_the_traceback(folder, capsys, monkeypatch):
    monkeypatch.setenv("ENGRAM_DEBUG", "1")
    monkeypatch.setattr("core.memory.manage.MemoryManager.list", lambda *a, **k: {}["missing"])
    assert run_cli(["--data-dir", str(folder), "memory", "list"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [("--debug", "memory", "list"), ("memory", "list", "--debug")])
def test_debug_shows_the_traceback(folder, capsys, monkeypatch, argv):
    monkeypatch.delenv("ENGRAM_DEBUG", raising=False)
    monkeypatch.setattr("core.memory.manage.MemoryManager.list", lambda *a, **k: {}["missing"])
    assert run_cli(["--data-dir", str(folder), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("engram: Something went wrong (KeyError: 'missing')") and "Traceback" in err


def test_an_unforeseen_failure_is_logged_without_the_users_text(folder, capsys, monkeypatch):
    secret = "my bank PIN is 4711"

    def fail(*args, **kwargs):
        raise ValueError(f"cannot file {secret}")
    monkeypatch.delenv("ENGRAM_DEBUG", raising=False)
    monkeypatch.setattr("core.memory.manage.MemoryManager.remember", fail)
    err = _one_line_failure(capsys, run_cli(["--data-dir", str(folder), "memory", "add", secret]))
    log = folder / "logs" / LOG_NAME
    assert f"the details are in {log}; run it again with --debug to see them here" in err
    text = log.read_text()
    assert "builtins.ValueError" in text and "cli/memory.py" in text and "in cmd_add" in text
    assert secret not in text and "4711" not in text  # a purge must be able to erase every copy of a memory
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700


def test_a_damaged_file_is_one_line_naming_engram_doctor(folder, capsys):
    path = folder / "engram.db"
    size = path.stat().st_size
    with path.open("r+b") as handle:  # garbage over the middle pages, as a failing disk might leave them
        handle.seek(size // 3)
        handle.write(bytes(range(256)) * ((size // 3) // 256))
    for argv in (("memory", "list"), ("memory", "pin", "1"), ("memory", "list")):
        err = _one_line_failure(capsys, run_cli(["--data-dir", str(folder), *argv]))
        assert "damaged" in err and "engram doctor" in err


def test_ctrl_c_is_one_line_and_exit_130(folder, capsys, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("core.memory.manage.MemoryManager.list", interrupt)
    assert run_cli(["--data-dir", str(folder), "memory", "list"]) == 130
    assert capsys.readouterr().err == "engram: interrupted\n"


def test_a_closed_pipe_ends_quietly(folder, capsys, monkeypatch):
    """`engram memory list | head -1`: the reader left; there is no one to tell."""
    def gone(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr("core.memory.manage.MemoryManager.list", gone)
    assert run_cli(["--data-dir", str(folder), "memory", "list"]) == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, message", [
    (("memory", "pin"), "engram: memory pin: the following arguments are required: ids "
                        "(see `engram memory pin --help`)"),
    (("memory", "lst"), "engram: memory: argument ACTION: invalid choice: 'lst'"),
    (("memory", "list", "--limit", "99999999999999999999"),
     "engram: memory list: argument --limit: '99999999999999999999' is out of range: it must be between 1 and "
     "100,000"),
    (("memory", "show", str(2**63)), f"engram: memory show: argument id: '{2**63}' is not an id (ids run from 1 to "
                                     f"{2**63 - 1})"),
    (("memory", "purge", "1", "--all"), "engram: give either the ids of trashed memories to purge or --all"),
])
def test_messages_name_the_command_once_and_fit_the_input(folder, capsys, argv, message):
    code = run_cli(["--data-dir", str(folder), *argv])
    assert code != 0
    assert capsys.readouterr().err.startswith(message)


def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_failure():
    import io
    from app.cli.terminal import SafeStream
    raw = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")
    SafeStream(raw).write("Zoë 🙂 \x1b[2J\n")
    raw.flush()
    assert raw.buffer.getvalue() == "Zoë \\U0001f642 \\u001b[2J\n".encode("latin-1")


@pytest.mark.parametrize("verb", [("memory", "list"), ("memory", "show", "1"), ("memory", "search", "lives"),
                                  ("memory", "list", "--json")])
def test_control_characters_in_memory_text_are_printed_escaped(folder, capsys, verb):
    assert run_cli(["--data-dir", str(folder), *verb]) == 0
    out = capsys.readouterr().out
    assert "Lisbon" in out
    assert not any(c in out for c in "\x1b\x07\x08\r\u202e\u2066"), repr(out)
    assert "\\x1b" in out or "\\u001b" in out  # shown, not hidden: the user sees what was stored


def test_printable_keeps_ordinary_text_and_escapes_controls():
    assert printable("Zoë 👩‍👩‍👧 naïve\tcafé\n") == "Zoë 👩‍👩‍👧 naïve\tcafé\n"
    assert printable("a\x1b[2Jb\u202ec\x85") == "a\\u001b[2Jb\\u202ec\\u0085"


def test_pin_of_many_ids_is_all_or_nothing(folder, capsys):
    assert run_cli(["--data-dir", str(folder), "memory", "pin", "1", "999"]) == 1
    capsys.readouterr()
    db = open_db(folder / "engram.db")
    assert db.scalar("SELECT pinned FROM memories WHERE id = 1") == 0
    db.close()


@pytest.mark.parametrize("fields", [
    {"created_at": "yesterday"}, {"created_at": 1e300}, {"created_at": math.nan}, {"created_at": -5},
    {"importance": math.nan}, {"importance": "high"}, {"confidence": math.inf}, {"valid_from": math.inf},
])
def test_the_api_refuses_a_bad_value_and_writes_nothing(tmp_path, fields):
    db = open_db(tmp_path / "engram.db")
    manager = MemoryManager(db, HashEmbedder())
    with pytest.raises(InvalidInput):
        manager.add("A fine statement.", **fields)
    assert db.scalar("SELECT count(*) FROM memories") == 0
    manager.add("Searches still work.")
    from core.memory.recall import recall
    assert recall(db, HashEmbedder(), "Searches still work.").hits
    db.close()


def _export_with(tmp_path: Path, **memory_fields) -> Path:
    row = {"id": 1, "statement": "Imported fact.", "created_at": 1_700_000_000.0, **memory_fields}
    doc = {"format": "engram-export", "version": 1, "sessions": [], "episodes": [], "memories": [row],
           "history": [], "edges": []}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("fields", [
    {"created_at": 1e300}, {"access_count": 2**70}, {"last_access": -1.0},
    {"protected": True, "deleted_at": 1_700_000_100.0},
])
def test_an_import_with_a_bad_value_is_refused_whole(tmp_path, fields):
    db = open_db(tmp_path / "engram.db")
    manager = MemoryManager(db, HashEmbedder())
    template = json.loads(_export_with(tmp_path).read_text())
    manager.export_to(tmp_path / "mine.json")
    shape = json.loads((tmp_path / "mine.json").read_text())
    path = _export_with(tmp_path, **fields)
    doc = json.loads(path.read_text())
    doc = {**shape, **{k: doc[k] for k in ("sessions", "episodes", "memories", "history", "edges")}}
    path.write_text(json.dumps(doc))
    assert template["memories"]
    with pytest.raises(InvalidInput):
        manager.import_from(path)
    assert db.scalar("SELECT count(*) FROM memories") == 0
    db.close()


def test_an_export_on_a_full_disk_leaves_the_previous_export_whole(tmp_path, monkeypatch):
    db = open_db(tmp_path / "engram.db")
    manager = MemoryManager(db, HashEmbedder())
    manager.add("First fact.")
    target = tmp_path / "export.json"
    manager.export_to(target)
    good = target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    manager.add("Second fact.")

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("core.store.files.os.fsync", full)
    with pytest.raises(OSError):
        manager.export_to(target)
    assert target.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(InvalidInput, match="not a regular file"):
        manager.export_to(Path("/dev/null"))
    db.close()


def test_the_gui_lanes_deliver_a_machine_failure_in_words(qtbot):
    """What a panel shows for a damaged file or a full disk is a sentence, not an exception's repr."""
    import apsw

    from app.ui.tasks import TaskRunner
    runner = TaskRunner()
    got = []

    def fail(error):
        raise error
    try:
        for error in (apsw.CorruptError("database disk image is malformed"),
                      OSError(errno.ENOSPC, "No space left on device"), InvalidInput("kept as it is")):
            with qtbot.waitSignal(runner._deliver, timeout=5000):
                runner.submit("db", fail, error, on_error=got.append)
        qtbot.waitUntil(lambda: len(got) == 3)
    finally:
        runner.shutdown()
    assert "damaged" in str(got[0]) and "engram doctor" in str(got[0])
    assert "disk is full" in str(got[1])
    assert got[2].__class__ is InvalidInput and str(got[2]) == "kept as it is"


@pytest.mark.parametrize("verb", ["show", "edit", "pin", "protect", "delete", "restore", "reject", "purge"])
def test_an_id_that_is_not_a_number_is_a_usage_error_for_every_verb(folder, capsys, verb):
    """`engram memory reject abc` exits 2 with argparse's message, as `memory show abc` does: the command line
    does not parse, whichever verb it is (a later id in the list is checked as well as the first)."""
    before = _digest(folder)
    ids = ["abc"] if verb in ("show", "edit") else ["1", "abc"]
    code = run_cli(["--data-dir", str(folder), "memory", verb, *ids])
    err = capsys.readouterr().err
    argument = "id" if verb in ("show", "edit") else "ids"
    assert (code, err) == (2, f"engram: memory {verb}: argument {argument}: 'abc' is not an id (ids are whole "
                              f"numbers, e.g. 12) (see `engram memory {verb} --help`)\n")
    assert _digest(folder) == before


def test_a_job_id_out_of_range_is_a_usage_error(folder, capsys):
    code = run_cli(["--data-dir", str(folder), "jobs", "run", str(2**64)])
    err = capsys.readouterr().err
    assert (code, err) == (2, f"engram: jobs run: argument job: '{2**64}' is not an id (ids run from 1 to "
                              f"{2**63 - 1}) (see `engram jobs run --help`)\n")
