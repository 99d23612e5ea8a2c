"""The app bundle's PyInstaller build, started in the background as soon as a run has collected a test that needs it.

Why: the build is ~90 s of mostly one core, and the suite itself keeps one of the CI machine's two cores busy.
Started at collection, at the lowest CPU priority, the build takes the idle core and gives way to any test that
wants both; it is done long before tests/test_packaging.py asks for it (that wait used to be ~90 s of the run).
Whether it built is still that file's fixture's to check.

Under pytest-xdist (`-n 2`) every worker collects the whole run, so the controller builds once, into a folder it
hands each worker (WORKER_INPUT); a worker's fixture waits for the build's status file there (SharedBuild).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BUILD_TIMEOUT = 45 * 60
WORKER_INPUT = "engram_bundle_work"  # the key of the controller's build folder in a pytest-xdist worker's input
WANTED = "wanted"  # a worker that collected a bundle test leaves this file in that folder
STATUS = "status.json"  # the build's outcome, written (whole) when it ends


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

    def announce(self) -> None:
        """Write STATUS when the build ends, for workers that did not start it (a thread of the run's own)."""
        def wait_then_write() -> None:
            status = self.process.wait()
            _write_status(self.work, status, time.monotonic() - self.started)
        threading.Thread(target=wait_then_write, name="bundle-build-status", daemon=True).start()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.work, ignore_errors=True)


@dataclass
class SharedBuild:
    """The controller's build as a pytest-xdist worker sees it: finished once its STATUS file is there."""
    work: Path

    @property
    def dist(self) -> Path:
        return self.work / "dist"

    def wait(self, timeout: float = BUILD_TIMEOUT) -> tuple[int, str, float]:
        """As BundleBuild.wait."""
        deadline = time.monotonic() + timeout
        while not (self.work / STATUS).is_file():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the bundle build in {self.work} did not end in {timeout:.0f} s")
            time.sleep(1.0)
        outcome = json.loads((self.work / STATUS).read_text(encoding="utf-8"))
        log = (self.work / "build.log").read_text(encoding="utf-8", errors="replace")[-4000:]
        return outcome["status"], log, outcome["seconds"]


def _write_status(work: Path, status: int, seconds: float) -> None:
    partial = work / f"{STATUS}.partial"
    partial.write_text(json.dumps({"status": status, "seconds": seconds}), encoding="utf-8")
    os.replace(partial, work / STATUS)  # a waiting worker reads it whole or not at all


STASH_KEY = pytest.StashKey[BundleBuild]()  # the run's build, on its config (the controller's, under xdist)
WORK_KEY = pytest.StashKey[Path]()  # under xdist: the folder the controller builds into, made before workers start


def new_work_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="engram-bundle-"))


def start(root: Path, work: Path | None = None) -> BundleBuild | None:
    """Start `pyinstaller packaging/engram.spec` into `work` (a fresh folder by default); None where PyInstaller is
    not installed."""
    if importlib.util.find_spec("PyInstaller") is None:
        return None
    work = work or new_work_folder()
    log = work / "build.log"
    command = [sys.executable, "-m", "PyInstaller", str(root / "packaging" / "engram.spec"), "--noconfirm",
               "--log-level", "WARN", "--distpath", str(work / "dist"), "--workpath", str(work / "build")]
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=_lowest_priority if os.name == "posix" else None)
    return BundleBuild(process, work, log, time.monotonic())


def _lowest_priority() -> None:
    os.nice(19)  # in the child, before PyInstaller starts: the tests' own work always comes first
