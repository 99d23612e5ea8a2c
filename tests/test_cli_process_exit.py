"""Every CLI verb ends with its own exit code, never a native abort at exit (issue 37, item 3): `engram models
download` against a local hub (tests/hubserver.py) exited 134 with "terminate called without an active exception"
in 5 of 7 runs after a successful install. Whole processes, because an abort at interpreter exit is invisible
inside one. The download checks the model by building it with MLX; that must not leave a native thread running
into the interpreter's exit."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hubfake import REPO
from hubserver import HubServer

ROOT = Path(__file__).resolve().parents[1]
RUNS = 4


def engram(data: Path, *argv: str, env: dict[str, str] | None = None,
           timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data), *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def hub_env(url: str) -> dict[str, str]:
    return {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1"}


@pytest.fixture
def server(tiny_model_dir):
    with HubServer(tiny_model_dir) as hub:
        yield hub


def test_models_download_ends_with_its_own_exit_code_every_time(tmp_path, server):
    for run in range(RUNS):
        done = engram(tmp_path / f"data-{run}", "models", "download", REPO, "--yes", env=hub_env(server.url))
        assert done.returncode == 0, (run, done.returncode, done.stderr[-2000:])
        assert "terminate called" not in done.stderr and "Traceback" not in done.stderr
        assert f"Installed {REPO}" in done.stdout


def test_a_failed_download_ends_in_one_engram_line(tmp_path, server):
    done = engram(tmp_path / "data", "models", "download", "tiny-org/missing", "--yes", env=hub_env(server.url))
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("engram: ")
    assert "Traceback" not in done.stderr
