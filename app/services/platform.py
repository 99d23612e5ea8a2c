"""macOS probes the scheduler needs: system-wide idle time (IOKit HIDIdleTime) and AC power (pmset), and the
idle-sleep assertion it holds while a job runs (caffeinate).

Each probe runs one small command and parses its text; parsing is separate so tests feed it recorded
output. Off macOS, idle time is unknown (None: the app's own activity decides) and power is read from
Linux sysfs when present, else unknown, which the scheduler counts as on power.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

PROBE_TIMEOUT_S = 3.0
_HID_IDLE = re.compile(r'"HIDIdleTime"\s*=\s*(\d+)')
_PMSET_SOURCE = re.compile(r"drawing from '([^']+)'")

Runner = Callable[[list[str]], Optional[str]]


def run_command(argv: list[str]) -> Optional[str]:
    """Output of a short command, or None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_hid_idle_seconds(ioreg_output: str) -> Optional[float]:
    """`ioreg -c IOHIDSystem` prints HIDIdleTime in nanoseconds; the smallest value is the latest input."""
    values = [int(v) for v in _HID_IDLE.findall(ioreg_output or "")]
    return min(values) / 1e9 if values else None


def parse_pmset_on_ac(pmset_output: str) -> Optional[bool]:
    """`pmset -g batt` starts with "Now drawing from 'AC Power'" (or 'Battery Power', 'UPS Power')."""
    match = _PMSET_SOURCE.search(pmset_output or "")
    if match is None:
        return None
    return match.group(1).strip().lower() == "ac power"


def linux_on_ac(power_supply_dir: Path = Path("/sys/class/power_supply")) -> Optional[bool]:
    """Any mains supply online -> True; mains present but all offline -> False; none found -> None."""
    try:
        supplies = list(power_supply_dir.iterdir())
    except OSError:
        return None
    mains = []
    for supply in supplies:
        try:
            if (supply / "type").read_text().strip() == "Mains":
                mains.append((supply / "online").read_text().strip() == "1")
        except OSError:
            continue
    return any(mains) if mains else None


def system_idle_seconds(*, platform: str | None = None, run: Runner = run_command) -> Optional[float]:
    if (platform or sys.platform) != "darwin":
        return None
    output = run(["ioreg", "-c", "IOHIDSystem"])  # no depth limit: where IOHIDSystem sits differs by Mac
    return parse_hid_idle_seconds(output) if output else None


def on_ac_power(*, platform: str | None = None, run: Runner = run_command,
                power_supply_dir: Path = Path("/sys/class/power_supply")) -> Optional[bool]:
    platform = platform or sys.platform
    if platform == "darwin":
        output = run(["pmset", "-g", "batt"])
        return parse_pmset_on_ac(output) if output else None
    if platform.startswith("linux"):
        return linux_on_ac(power_supply_dir)
    return None


def this_machine(platform: str | None = None) -> str:
    """How the app names the computer it runs on: "this Mac" on macOS, "this computer" elsewhere."""
    return "this Mac" if (platform or sys.platform) == "darwin" else "this computer"


def keep_awake(reason: str, *, platform: str | None = None, spawn: Callable[..., Any] = subprocess.Popen,
               pid: int | None = None) -> contextlib.AbstractContextManager:
    """Hold an idle-sleep assertion for the length of a `with` on macOS: `caffeinate -i -w PID` as a child, which
    also lets go by itself if this process dies. Elsewhere, and when caffeinate cannot start, nothing is held.
    `reason` names the job (shown by `pmset -g assertions` as caffeinate's)."""
    if (platform or sys.platform) != "darwin":
        return contextlib.nullcontext()
    return _caffeinated(spawn, os.getpid() if pid is None else pid)


@contextlib.contextmanager
def _caffeinated(spawn: Callable[..., Any], pid: int) -> Iterator[None]:
    try:
        child = spawn(["caffeinate", "-i", "-w", str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):  # no caffeinate: the job still runs, the Mac may sleep
        child = None
    try:
        yield
    finally:
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=PROBE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
