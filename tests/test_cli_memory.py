"""`engram memory ...` end to end through app.cli.main.run_cli, plus one run of the real `python -m app` entry."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


from app.cli.main import run_cli
from core.store.db import open_db

ROOT = Path(__file__).resolve().parents[1]


def _ok(result) -> str:
    code, out, err = result
    assert code == 0, err
    return out


def test_adding_what_is_already_remembered_says_so(cli):
    _ok(cli("memory", "add", "Ana lives in Lisbon", "--confidence", "0.8"))
    assert _ok(cli("memory", "add", "ana lives in lisbon")).strip() == "already remembered: #1, confidence now 0.9"
    assert len(json.loads(_ok(cli("memory", "list", "--json")))) == 1


def test_add_list_show_edit_pin_protect(cli):
    assert "remembered #1" in _ok(cli("memory", "add", "Ana lives in Lisbon", "--subject", "Ana",
                                      "--relation", "lives in", "--object", "Lisbon"))
    _ok(cli("memory", "add", "I am allergic to peanuts", "--critical", "--pin"))
    listing = _ok(cli("memory", "list"))
    assert "#2" in listing and "Ana lives in Lisbon" in listing
    assert json.loads(_ok(cli("memory", "list", "--pinned", "--json")))[0]["statement"] == "I am allergic to peanuts"
    assert "is now: Ana lives in Porto" in _ok(cli("memory", "edit", "1", "--statement", "Ana lives in Porto",
                                                  "--object", "Porto", "--reason", "she moved"))
    _ok(cli("memory", "pin", "1"))
    _ok(cli("memory", "pin", "1", "--off"))
    assert "#1 protected" in _ok(cli("memory", "protect", "1"))
    shown = _ok(cli("memory", "show", "1"))
    assert "Ana lives in Porto" in shown and "triple: (Ana, lives in, Porto)" in shown
    for action in ("create", "update", "pin", "unpin", "protect"):
        assert action in shown
    assert "Lisbon -> Ana lives in Porto" in shown and "(she moved)" in shown
    details = json.loads(_ok(cli("memory", "show", "1", "--json")))
    assert [h["action"] for h in details["history"]] == ["create", "update", "pin", "unpin", "protect"]


def test_delete_restore_purge(cli):
    _ok(cli("memory", "add", "first"))
    _ok(cli("memory", "add", "second"))
    assert "moved to the trash" in _ok(cli("memory", "delete", "1", "2"))
    assert "no memories match" in _ok(cli("memory", "list"))
    assert "#1 restored" in _ok(cli("memory", "restore", "#1"))
    assert "purged 1 memory and 0 episodes" in _ok(cli("memory", "purge", "2"))
    code, _, err = cli("memory", "purge")
    assert code == 1 and "--all" in err
    _ok(cli("memory", "delete", "1"))
    assert "purged 1 memory and 0 episodes" in _ok(cli("memory", "purge", "--all"))
    assert json.loads(_ok(cli("memory", "list", "--status", "all", "--json"))) == []


def test_export_then_import_into_another_folder(cli, tmp_path):
    _ok(cli("memory", "add", "Ana lives in Lisbon", "--protect"))
    _ok(cli("memory", "edit", "1", "--confidence", "0.5"))
    path = tmp_path / "out.json"
    assert "0 sessions, 0 episodes, 1 memory, 3 history rows, 0 edges" in _ok(cli("memory", "export", str(path)))
    other = tmp_path / "other"
    code = run_cli(["--data-dir", str(other), "memory", "import", str(path)])
    assert code == 0
    code = run_cli(["--data-dir", str(other), "memory", "import", str(path)])
    assert code == 0
    code, out, _ = cli("memory", "import", str(path))  # into the store it came from: nothing is doubled
    assert "imported 0 memories" in out and "already here, not added again: 1 memory, 0 episodes, 0 sessions" in out
    listed = json.loads(_ok(cli("memory", "list", "--json")))
    assert [m["id"] for m in listed] == [1] and all(m["protected"] for m in listed)
    other_db = open_db(other / "engram.db")
    try:
        assert other_db.scalar("SELECT count(*) FROM memories") == 1  # two imports there: one copy
    finally:
        other_db.close()


def test_search_prints_hits_with_why(cli):
    _ok(cli("memory", "add", "I am allergic to peanuts"))
    _ok(cli("memory", "add", "The car needs new tyres"))
    out = _ok(cli("memory", "search", "what food should I avoid?", "-k", "2"))
    assert out.splitlines()[0].split()[:2] == ["memory", "#1"] and "why:" in out
    hits = json.loads(_ok(cli("memory", "search", "food allergy", "--json")))
    assert hits[0]["id"] == 1 and hits[0]["kind"] == "memory"


def test_reembed(cli):
    _ok(cli("memory", "add", "Ana lives in Lisbon"))
    assert "re-embedded 1 memory or episode" in _ok(cli("memory", "reembed"))


def test_python_dash_m_app_entry(tmp_path):
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "app", "memory", "list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no memories match" in done.stdout
    assert (tmp_path / "home" / "engram.db").exists()
    bad = subprocess.run([sys.executable, "-m", "app", "memory", "show", "41"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip() == "engram: no memory with id 41"
