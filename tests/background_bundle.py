"""The app bundle's PyInstaller build, started in the background as soon as a run has collected a test that needs it.

Why: the build is ~90 s of mostly one core, and the suite itself keeps one of the CI machine's two cores busy.
Started at collection, at the lowest CPU priority, the build takes the idle core and gives way to any test that
wants both; it is done long before tests/test_packaging.py asks for it (that wait used to be ~90 s of the run).
Whether it built is still that file's fixture's to check.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BUILD_TIMEOUT = 45 * 60


@dataclass
class BundleBuild:
    process: subprocess.Popen
    work: Path  # --distpath and --workpath live here; removed when the run ends
    log: Path
    started: float  # time.monotonic()

    @property
    def dist(self) -> Path:
        return self.work / "dist"

    def wait(self, timeout: float = BUILD_TIMEOUT) -> tuple[int, str, float]:
        """(exit status, the log's last 4,000 characters, seconds since the build started)."""
        status = self.process.wait(timeout=timeout)
        return status, self.log.read_text(encoding="utf-8", errors="replace")[-4000:], time.monotonic() - self.started

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.work, ignore_errors=True)


STASH_KEY = pytest.StashKey[BundleBuild]()  # the run's build, on its config


def start(root: Path) -> BundleBuild | None:
    """Start `pyinstaller packaging/engram.spec` into a fresh folder; None where PyInstaller is not installed."""
    if importlib.util.find_spec("PyInstaller") is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="engram-bundle-"))
    log = work / "build.log"
    command = [sys.executable, "-m", "PyInstaller", str(root / "packaging" / "engram.spec"), "--noconfirm",
               "--log-level", "WARN", "--distpath", str(work / "dist"), "--workpath", str(work / "build")]
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=_lowest_priority if os.name == "posix" else None)
    return BundleBuild(process, work, log, time.monotonic())


def _lowest_priority() -> None:
    os.nice(19)  # in the child, before PyInstaller starts: the tests' own work always comes first
