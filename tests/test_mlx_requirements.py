"""An mlx older than the code calls (issue 36.4): one line naming the version needed, from the window, the chat
engine and `--self-check` alike, never an AttributeError at the first reply. pyproject's floors say the same."""
from __future__ import annotations

import io
import re
import tomllib
from pathlib import Path

import pytest

from models.mlx_requirements import MINIMUM_MLX, MINIMUM_MLX_LM, REQUIRED, MLXTooOld, mlx_problem, require_mlx

ROOT = Path(__file__).resolve().parent.parent
LINE = ("Engram needs MLX 0.32.2 or newer; this is 0.29.0 (it has no mx.new_thread_local_stream) — "
        "update it: pip install -U \"mlx>=0.32.2\" \"mlx-lm>=0.32.2\"")


@pytest.fixture
def mlx_029(monkeypatch):
    """mlx.core as mlx 0.29.0 has it: neither function Engram calls."""
    import mlx.core as mx
    for name, _ in REQUIRED:
        monkeypatch.delattr(mx, name)
    monkeypatch.setattr(mx, "__version__", "0.29.0")
    return mx


def test_this_mlx_has_what_the_code_calls():
    import mlx.core as mx
    assert mlx_problem() is None and require_mlx() == mx.__version__


def test_an_older_mlx_is_one_line_naming_both_versions(mlx_029):
    assert mlx_problem() == LINE
    with pytest.raises(MLXTooOld, match=re.escape(LINE)):
        require_mlx()


def test_the_self_check_says_it_in_one_line_without_a_traceback(mlx_029, capsys):
    from app.services.selfcheck import run_self_check
    out = io.StringIO()
    assert run_self_check(out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("  ok resources") and lines[1:] == [f"FAIL mlx: {LINE}"]
    assert capsys.readouterr().err == ""


def test_the_chat_engine_refuses_to_load_before_the_first_reply(mlx_029, tiny_model_dir):
    from models.chat import ChatEngine
    with pytest.raises(MLXTooOld, match=re.escape(LINE)):
        ChatEngine.load(tiny_model_dir)


def test_the_window_shows_the_line_and_does_not_open(mlx_029, monkeypatch, engram_home, capsys, qapp):
    from PySide6.QtWidgets import QMessageBox

    from app.ui import main_window
    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text: shown.append((title, text)))
    assert main_window.launch() == 1
    assert shown == [("Engram", LINE)] and capsys.readouterr().err == f"engram: {LINE}\n"
    assert not engram_home.exists()


def test_pyproject_floors_are_the_versions_checked():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    mlx = [d for d in dependencies if re.match(r"mlx(\[cpu\])?[><=]", d)]
    mlx_lm = [d for d in dependencies if d.startswith("mlx-lm")]
    assert mlx and all(f">={MINIMUM_MLX}," in d for d in mlx)
    assert mlx_lm and all(f">={MINIMUM_MLX_LM}," in d for d in mlx_lm)
    # the floor is at least what the code calls (mlx-lm's own need may raise it)
    assert max(tuple(map(int, v.split("."))) for _, v in REQUIRED) <= tuple(map(int, MINIMUM_MLX.split(".")))


def test_engram_chat_says_it_in_one_line_before_the_first_reply(cli, tiny_model_dir, monkeypatch):
    assert cli("models", "use", str(tiny_model_dir))[0] == 0
    import mlx.core as mx
    for name, _ in REQUIRED:
        monkeypatch.delattr(mx, name)
    monkeypatch.setattr(mx, "__version__", "0.29.0")
    code, out, err = cli("chat", typed="hello")
    assert code == 1 and err.splitlines()[-1] == f"engram: {LINE}"  # after its "Loading <folder> ..." line
    assert "engram> " not in out and "Traceback" not in err


def test_the_window_checks_the_installed_version_without_importing_mlx(monkeypatch):
    import importlib.metadata
    import sys

    from models.mlx_requirements import installed_mlx_problem
    monkeypatch.delitem(sys.modules, "mlx.core")  # as at the window's start: nothing has imported MLX yet
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.29.0")
    assert installed_mlx_problem().startswith("Engram needs MLX 0.32.2 or newer; this is 0.29.0")
    assert "mlx.core" not in sys.modules
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.32.2")
    assert installed_mlx_problem() is None and "mlx.core" not in sys.modules
