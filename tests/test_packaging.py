"""The packaged app: build the onedir bundle with PyInstaller (packaging/engram.spec) and run its --self-check.

Slow (a minute or two: PyInstaller analyses Qt, MLX and transformers), so it is marked slow; CI runs it. The build
starts in the background as soon as the run is collected (tests/background_bundle.py). On macOS the same spec makes
Engram.app and the binary inside the bundle is checked.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests import background_bundle

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT = background_bundle.BUILD_TIMEOUT


def bundle_binary(dist: Path) -> Path:
    if sys.platform == "darwin":
        return dist / "Engram.app" / "Contents" / "MacOS" / "engram"
    return dist / "engram" / "engram"


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def bundle(request):
    """The bundle that tests/conftest.py started building at collection (tests/background_bundle.py)."""
    pytest.importorskip("PyInstaller")
    shared = getattr(request.config, "workerinput", {}).get(background_bundle.WORKER_INPUT)
    build = (background_bundle.SharedBuild(Path(shared)) if shared is not None  # the pytest-xdist controller's
             else request.config.stash.get(background_bundle.STASH_KEY, None))
    assert build is not None, "the run collected a bundle test but started no build"
    status, log, seconds = build.wait()
    assert status == 0, log
    binary = bundle_binary(build.dist)
    assert binary.is_file()
    print(f"\nbundle built in {seconds:.0f} s from the start of the run's build, "
          f"{folder_bytes(binary.parent) / 2**20:.0f} MB")
    return binary


def run_bundled(binary: Path, *args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENGRAM_HOME": str(home), "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)  # the bundle must not borrow modules from this checkout or the venv
    return subprocess.run([str(binary), *args], cwd=home, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT + 900)
def test_bundle_self_check_passes(bundle, tmp_path):
    done = run_bundled(bundle, "--self-check", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("OK ") and "mlx=" in last
    for step in ("resources", "store", "embed+recall", "mlx model", "stream", "structured", "qt"):
        assert f"ok {step}" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_bundle_runs_the_command_line_and_leaves_out_unused_parts(bundle, tmp_path):
    done = run_bundled(bundle, "models", "list", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(json.loads(done.stdout)["models"]) >= 5
    done = run_bundled(bundle, "-m", "nothing.here", home=tmp_path)
    assert done.returncode == 2  # only the fine-tune and GGUF workers may be run by module name
    internal = bundle.parent / "_internal" if sys.platform != "darwin" else bundle.parents[1] / "Frameworks"
    for unused in ("torch", "sentence_transformers", "scipy", "sklearn", "tkinter", "PySide6/Qt/lib/libQt6Quick.so.6"):
        assert not (internal / unused).exists(), unused  # the embedder runs without torch (models/bert_embedder.py)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_bundle_converts_a_gguf_in_its_own_worker_process(bundle, tmp_path, monkeypatch):
    """The shipped app has no `python`: "Add a GGUF file…" runs `engram -m models.gguf_worker`, which must hold all
    a conversion needs; a file that crashes the reader crashes only that process."""
    from core.errors import ModelError
    from models.checks import check_model_folder
    from models.gguf_worker import convert_isolated
    from models.testing_real import smollm2_gguf
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the bundle must not borrow modules from this checkout
    hostile = tmp_path / "hostile.gguf"
    hostile.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2 ** 40, 0))
    with pytest.raises(ModelError, match="hostile.gguf could not be read"):  # now by the header check, before MLX
        convert_isolated(hostile, tmp_path / "hostile", python=str(bundle))
    try:
        gguf = smollm2_gguf()
    except ModelError as exc:
        pytest.skip(str(exc))
    stages = []
    done = convert_isolated(gguf, tmp_path / "smollm2", python=str(bundle), progress=lambda s, f: stages.append(s))
    assert done.architecture == "llama" and stages[0] == "reading" and stages[-1] == "done"
    assert check_model_folder(done.folder)["model_type"] == "llama"
