"""The command line starts cheap and says what it can do (issues 16.3 and 14.5).

Parsing and `--help` import no runtime — no MLX, torch, Hugging Face, Qt, numpy or SQLite — and a verb imports
only what it uses (`engram memory list` never loads MLX or torch). Every verb is listed in its group's `--help`, a
group named alone lists, and `--self-check` and `--screenshots` are in `engram --help`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import BARE_ACTIONS, build_parser, run_cli

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES = ("mlx", "mlx_lm", "torch", "transformers", "sentence_transformers", "huggingface_hub", "PySide6",
            "numpy", "apsw", "sqlite_vec", "networkx", "llguidance", "tokenizers", "pyqtgraph")
NEVER_FOR_A_LISTING = ("mlx", "mlx_lm", "torch", "transformers", "sentence_transformers", "huggingface_hub",
                       "PySide6", "llguidance")

PROBE = """
import contextlib, io, json, sys
from app.__main__ import main
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    if code not in (0, None):
        sys.exit(f"{argv}: exit {code}")
print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))
"""


def _modules_after(*argvs: list[str], env: dict | None = None) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(argvs))], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def _groups() -> dict[str, argparse.ArgumentParser]:
    root = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(root.choices)


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    inner = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(inner[0].choices) if inner else {}


def test_help_and_every_groups_help_import_no_runtime():
    argvs = [["--help"], *([name, "--help"] for name in _groups())]
    argvs += [[group, verb, "--help"] for group, parser in _groups().items() for verb in _verbs(parser)]
    loaded = _modules_after(*argvs)
    assert not loaded & set(RUNTIMES), sorted(loaded & set(RUNTIMES))


def test_a_listing_never_loads_a_model_runtime(tmp_path):
    loaded = _modules_after(["--data-dir", str(tmp_path / "data"), "memory", "list"],
                            ["--data-dir", str(tmp_path / "data"), "memory"],
                            ["--data-dir", str(tmp_path / "data"), "hypotheses"],
                            ["--data-dir", str(tmp_path / "data"), "goals"])
    assert "apsw" in loaded  # it did open the store
    assert not loaded & set(NEVER_FOR_A_LISTING), sorted(loaded & set(NEVER_FOR_A_LISTING))


def test_a_command_line_that_does_not_parse_imports_no_runtime():
    done = subprocess.run([sys.executable, "-c", PROBE.replace("sys.exit(f\"{argv}: exit {code}\")", "pass"),
                           json.dumps([["memory", "lst"], ["memory", "show", str(2**64)], ["nonsense"]])],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not set(json.loads(done.stdout)) & set(RUNTIMES)


def test_every_verb_is_listed_in_its_groups_help():
    for group, parser in _groups().items():
        text = parser.format_help()
        for verb in _verbs(parser):
            assert f"\n    {verb} " in text or f"\n    {verb}\n" in text, f"`engram {group} --help` hides {verb}"


def test_engram_help_lists_the_whole_app_checks():
    text = build_parser().format_help()
    assert "--self-check" in text and "--screenshots DIR" in text and "--debug" in text


@pytest.mark.parametrize("group", sorted(BARE_ACTIONS))
def test_a_group_named_alone_runs_its_listing(group, tmp_path, capsys, monkeypatch):
    from models import budget
    steady = budget.MemoryBudget(8 * 2**30, budget.AVAILABLE_RAM)  # free memory moves between runs on a busy machine
    monkeypatch.setattr(budget, "memory_budget", lambda *args, **kwargs: steady)
    folder = str(tmp_path / "data")
    assert run_cli(["--data-dir", folder, group, BARE_ACTIONS[group]]) == 0
    listed = capsys.readouterr()
    assert run_cli(["--data-dir", folder, group]) == 0
    assert capsys.readouterr() == listed
    assert run_cli([group, "--data-dir", folder]) == 0  # the data folder may follow the command too
    assert capsys.readouterr() == listed


def test_the_readme_commands_run(tmp_path, capsys):
    """Issue 14.5: `engram hypotheses` and `engram goals` exited 2 ("ACTION required")."""
    folder = str(tmp_path / "data")
    assert run_cli(["--data-dir", folder, "hypotheses"]) == 0
    assert "no hypotheses yet" in capsys.readouterr().out
    assert run_cli(["--data-dir", folder, "goals"]) == 0
    assert "no open learning goals" in capsys.readouterr().out
    assert run_cli(["--data-dir", folder, "hypotheses", "list", "--status", "open", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_the_whole_app_checks_run_alone(capsys):
    assert run_cli(["--self-check", "memory", "list"]) == 2
    assert capsys.readouterr().err == "engram: --self-check, --smoke and --screenshots run alone, not with a command\n"
    assert run_cli(["--smoke", "--self-check"]) == 2
    assert "run one at a time" in capsys.readouterr().err
    assert run_cli([]) == 2  # (`engram` with nothing opens the window: app.__main__ never gets here)
    assert "give a COMMAND" in capsys.readouterr().err


def test_names_kept_beside_the_parser_match_the_core_ones():
    """The parser names a few of core's constants itself, so that parsing opens no SQLite."""
    from app.cli import finetune as cli_finetune, jobs as cli_jobs, learning as cli_learning, memory as cli_memory
    from core import jobs, types
    from core.memory import manage
    from core.store import hypotheses
    from core.store import jobs as job_store
    assert cli_memory.MEMORY_KINDS == types.MEMORY_KINDS
    assert cli_memory.SAID_OUTRIGHT == manage.SAID_OUTRIGHT
    assert cli_learning.HYPOTHESIS_STATUSES == hypotheses.STATUSES
    assert cli_jobs.JOB_STATES == job_store.JOB_STATES
    assert cli_finetune.FINETUNE == jobs.FINETUNE


def test_listing_verbs_leave_networkx_unimported(tmp_path):
    """`forget --preview`, `jobs list` and `finetune status` start in well under a second: networkx (~0.3 s of
    imports) loads only where PageRank runs (issue 41.3, bench/cold.py)."""
    data = str(tmp_path / "data")
    loaded = _modules_after(["--data-dir", data, "forget", "--preview"], ["--data-dir", data, "jobs", "list"],
                            ["--data-dir", data, "finetune", "status"])
    assert "networkx" not in loaded
