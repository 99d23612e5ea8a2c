"""Unclear or wrong messages (issue 37): no data at risk, but each said the wrong thing or did what was not asked.
Each ends in one `engram:` line that says what happened, and changes nothing it was not asked to change."""
from __future__ import annotations

import json
import os
import stat

import pytest

from core.store import health
from core.store.db import open_db


def _last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def test_an_import_naming_a_missing_memory_says_memory_not_memorie(cli, tmp_path):
    assert cli("memory", "add", "The user lives in Porto")[0] == 0
    path = tmp_path / "in.json"
    assert cli("memory", "export", str(path))[0] == 0
    data = json.loads(path.read_text(encoding="utf-8"))
    data["memories"][0]["superseded_by"] = 5
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli("memory", "import", str(path))
    assert code == 1 and "memorie " not in err and "refers to memory 5" in err


def test_hypotheses_edit_with_an_empty_claim_says_the_claim_is_empty(cli):
    code, _, err = cli("hypotheses", "edit", "1", "")
    assert code != 0 and "unrecognized arguments" not in err
    assert _last_line(err).startswith("engram: ") and "empty" in err


def test_models_use_with_an_empty_name_is_refused_not_the_current_folder(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("models", "use", "")
    assert code != 0 and _last_line(err).startswith("engram: ") and "give" in err.lower()
    assert not (cli.data_dir / "models" / "added-folders.json").exists()


def test_export_over_an_existing_file_refuses_without_force(cli, tmp_path):
    assert cli("memory", "add", "The user likes green tea")[0] == 0
    target = tmp_path / "mine.json"
    target.write_text("my own notes", encoding="utf-8")
    code, _, err = cli("memory", "export", str(target))
    assert code == 1 and "--force" in err and target.read_text(encoding="utf-8") == "my own notes"
    code, out, _ = cli("memory", "export", str(target), "--force")
    assert code == 0 and json.loads(target.read_text(encoding="utf-8"))["memories"]


def test_a_read_only_store_can_be_listed_and_exported(cli, tmp_path):
    assert cli("memory", "add", "The user likes green tea")[0] == 0
    store = cli.data_dir / "engram.db"
    os.chmod(store, 0o400)
    os.chmod(cli.data_dir, 0o500)
    try:
        code, out, err = cli("memory", "list")
        assert code == 0, err
        assert "green tea" in out
        code, _, err = cli("memory", "export", str(tmp_path / "out.json"))
        assert code == 0, err
        assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["memories"]
        code, _, err = cli("memory", "add", "Something new")
        assert code == 1 and "read-only" in err
    finally:
        os.chmod(cli.data_dir, 0o700)
        os.chmod(store, 0o600)


def test_a_dangling_store_symlink_is_refused_and_nothing_is_created(cli, tmp_path):
    cli.data_dir.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere" / "gone.db"
    elsewhere.parent.mkdir()
    (cli.data_dir / "engram.db").symlink_to(elsewhere)
    code, _, err = cli("memory", "list")
    assert code == 1 and "link" in err and _last_line(err).startswith("engram: ")
    assert list(elsewhere.parent.iterdir()) == []


def test_the_damaged_marker_is_private(tmp_path):
    path = tmp_path / "engram.db"
    open_db(path).close()
    health.mark_damaged(path, "test")
    assert stat.S_IMODE(health.marker_path(path).stat().st_mode) == 0o600


def test_a_row_with_a_word_for_a_date_is_found_by_doctor_and_repaired(cli):
    for text in ("The user likes green tea", "The user lives in Porto"):
        assert cli("memory", "add", text)[0] == 0
    db = open_db(cli.data_dir / "engram.db")
    db.execute("UPDATE memories SET created_at = 'yesterday' WHERE id = 1")
    db.close()
    code, out, _ = cli("doctor")
    assert code == 1 and "created_at" in out
    code, out, err = cli("doctor", "--rebuild")
    assert code == 0, err
    assert cli("memory", "show", "1")[0] == 0
    assert cli("memory", "search", "green tea")[0] == 0
    code, out, _ = cli("doctor")
    assert code == 0 and "sound" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_says_so_and_changes_nothing(cli, tmp_path):
    import subprocess
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)]).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        data = mount / "data"
        cli.data_dir = data
        code, _, err = cli_in(cli, data, "memory", "add", "The user likes green tea")
        assert code == 0, err
        ballast = mount / "ballast"
        with ballast.open("wb") as out:  # fill the disk to its last block
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError:
                pass
        code, _, err = cli_in(cli, data, "memory", "add", "A long memory " * 2000)
        assert code == 1 and _last_line(err).startswith("engram: ") and "disk is full" in err.lower()
        assert "nothing was changed" in err.lower() and "Something went wrong" not in err
        ballast.unlink()
        code, out, _ = cli_in(cli, data, "memory", "list")
        assert code == 0 and "A long memory" not in out and "green tea" in out
    finally:
        subprocess.run(["umount", "-l", str(mount)])


def cli_in(cli, data, *argv):
    from app.cli.main import run_cli
    import io
    import contextlib
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(["--data-dir", str(data), *argv])
    return code, out.getvalue(), err.getvalue()
