"""`engram --self-check` from source (the frozen build runs it in tests/test_packaging.py) and resource paths."""
from __future__ import annotations

import importlib.metadata
import io
import sys
import tomllib
from pathlib import Path

import pytest

from app.services import resources, selfcheck
from app.__main__ import main
from core.errors import NotFound


def test_self_check_passes_and_prints_versions(monkeypatch, embedder, capsys, qapp):
    # qapp: the check's Qt step reuses the application it finds; without pytest-qt's QApplication first it makes
    # a bare QGuiApplication, and every widget test after it in this process aborts.
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)
    assert main(["--self-check"]) == 0
    out = capsys.readouterr().out
    for step, _ in selfcheck.STEPS:
        assert f"ok {step}" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("OK ") and "mlx=" in last and "sqlite-vec=" in last and "python=" in last


def test_self_check_fails_loudly_on_any_step(monkeypatch):
    def broken(ctx):
        raise RuntimeError("libmlx is missing")
    monkeypatch.setattr(selfcheck, "STEPS", (selfcheck.STEPS[0], ("mlx model", broken), selfcheck.STEPS[1]))
    out = io.StringIO()
    assert selfcheck.run_self_check(out) == 1
    assert "FAIL mlx model: RuntimeError: libmlx is missing" in out.getvalue()
    assert "ok store" not in out.getvalue() and "OK " not in out.getvalue()


def test_schema_problems_catches_each_rule():
    assert selfcheck.schema_problems({"city": "Lisbon", "likes": ["tea"], "confidence": 80}) == []
    assert selfcheck.schema_problems([]) == ["not an object"]
    bad = {"city": "x" * 30, "likes": ["a"] * 4, "confidence": True, "extra": 1}
    assert set(selfcheck.schema_problems(bad)) == {"unexpected extra", "city", "likes", "confidence"}


def test_resource_path_from_source_and_frozen(monkeypatch, tmp_path):
    assert resources.resource_path(resources.APP_ICON).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for bad in ("", "..", "../pyproject.toml", "missing.png"):
        with pytest.raises(NotFound):
            resources.resource_path(bad)
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "engram.png").write_bytes(b"icon")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resources.resource_path("engram.png") == tmp_path / "resources" / "engram.png"
    (tmp_path / "resources" / resources.VERSION_FILE).write_text("9.8.7\n")
    monkeypatch.setattr(importlib.metadata, "version", _not_installed)
    assert resources.engram_version() == "9.8.7"


def _not_installed(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


def test_engram_version_from_a_checkout():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert resources.engram_version() == pyproject["project"]["version"]


def test_bundled_module_runner_only_runs_known_modules(monkeypatch, capsys):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert main(["-m", "os"]) == 2
    assert "runs only models.train_worker" in capsys.readouterr().err
