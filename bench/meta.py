"""What every bench result records about its run: the machine, the date, the code and how busy the machine was."""
from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def code_version() -> dict:
    """The commit measured, and the source files that differed from it (other work in progress in the tree)."""
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.rstrip("\n") if done.returncode == 0 else ""
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "core", "models", "app").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD") or None,
            "uncommitted_source_files": sorted(line[3:] for line in changed)}


def load_average() -> float:
    """Runnable processes over the last minute (2 cores here: above 2, a bench waited for a core)."""
    return round(os.getloadavg()[0], 2)


def stamp(name: str) -> dict:
    """The header of a bench's JSON. The load average shows whether other work shared the cores meanwhile."""
    return {"bench": name, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average_1m_at_start": load_average(), **code_version()}
