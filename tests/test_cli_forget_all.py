"""`engram memory reject` ("this is wrong") and `engram memory forget-all` through app.cli.main.run_cli."""
from __future__ import annotations

import json

from core.store.db import open_db


def _ok(result) -> str:
    code, out, err = result
    assert code == 0, err
    return out


def _counts(data_dir) -> dict[str, int]:
    db = open_db(data_dir / "engram.db")
    try:
        return {t: db.scalar(f"SELECT count(*) FROM {t}") for t in ("memories", "memory_history", "rejections")}
    finally:
        db.close()


def test_reject_trashes_the_memory_and_says_it_will_not_be_learned_again(cli):
    _ok(cli("memory", "add", "User drinks oat milk", "--subject", "user", "--relation", "drinks",
            "--object", "oat milk"))
    out = _ok(cli("memory", "reject", "1"))
    assert "#1" in out and "not learn it again" in out
    listed = json.loads(_ok(cli("memory", "list", "--status", "trashed", "--json")))
    assert [m["id"] for m in listed] == [1] and _counts(cli.data_dir)["rejections"] == 2


def test_forget_all_with_the_typed_word_wipes_and_the_backup_restores(cli):
    _ok(cli("memory", "add", "Ana lives in Lisbon"))
    _ok(cli("memory", "add", "User likes short answers"))
    before = _counts(cli.data_dir)
    out = _ok(cli("memory", "forget-all", "--confirm", "FORGET"))
    assert "erased 2 memories" in out and "engram doctor --restore --force" in out
    backup = next((cli.data_dir / "backups").glob("engram-*-before-forget-everything.db"))
    assert str(backup) in out
    assert _counts(cli.data_dir) == {"memories": 0, "memory_history": 0, "rejections": 0}
    code, _, err = cli("doctor", "--restore")  # the emptied store passes its checks: not replaced unasked
    assert code == 1 and "--force" in err
    assert "Restored" in _ok(cli("doctor", "--restore", "--force"))
    assert _counts(cli.data_dir) == before


def test_forget_all_asks_for_the_word_and_a_wrong_word_changes_nothing(cli):
    _ok(cli("memory", "add", "Ana lives in Lisbon"))
    before = _counts(cli.data_dir)
    code, out, err = cli("memory", "forget-all", typed="forget please")
    assert code == 1 and "Type FORGET" in out and len(err.strip().splitlines()) == 1 and "nothing was erased" in err
    code, _, err = cli("memory", "forget-all", "--confirm", "yes")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "nothing was erased" in err
    assert _counts(cli.data_dir) == before and not (cli.data_dir / "backups").exists()
    out = _ok(cli("memory", "forget-all", typed="FORGET"))
    assert "erased 1 memory, 0 conversation turns" in out and _counts(cli.data_dir)["memories"] == 0
