"""A worker process dies with the process that started it (a fine-tune or a GGUF conversion left running for
nobody holds gigabytes of memory and a CPU).

The parent hands over its pid at spawn (child_env); the worker checks it before anything else (stop_with_parent),
so a parent killed while the worker was still starting — its imports took ~0.6 s — is noticed at once. After that,
on Linux, the kernel sends SIGTERM the moment the parent dies (PR_SET_PDEATHSIG; it follows the spawning thread,
and every spawner here waits for its worker on that thread), and everywhere a watch thread polls the parent pid.
Standard library only: it runs before the worker's imports.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Callable

PARENT_ENV = "ENGRAM_PARENT_PID"
EXIT_PARENT_GONE = 3  # the workers' "cancelled" code: stopped, nothing of value lost
PR_SET_PDEATHSIG = 1


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker spawned by this process: this pid under PARENT_ENV."""
    return {**(os.environ if base is None else base), PARENT_ENV: str(os.getpid())}


def stop_with_parent(*, getppid: Callable[[], int] = os.getppid, watch: bool = True) -> None:
    """The worker's first call: exit at once when the parent named at spawn is gone already; otherwise stop when it
    goes (SIGTERM, then a certain exit)."""
    said = os.environ.get(PARENT_ENV, "")
    parent = int(said) if said.isdigit() else getppid()
    if getppid() != parent:
        os._exit(EXIT_PARENT_GONE)
        return
    if _die_with_parent() and getppid() != parent:  # died between the check and the kernel's watch
        os._exit(EXIT_PARENT_GONE)
        return
    if watch:
        watch_parent(parent, getppid=getppid)


def _die_with_parent() -> bool:
    if not sys.platform.startswith("linux"):
        return False  # macOS has no such call: the watch thread below does it
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def watch_parent(parent: int, *, poll: float = 0.5, grace: float = 30.0,
                 getppid: Callable[[], int] = os.getppid) -> threading.Thread:
    """Once the parent is gone the worker is asked to stop (SIGTERM: training checkpoints and ends), and it exits
    for certain after `grace` seconds."""
    def watch() -> None:
        while getppid() == parent:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os._exit(EXIT_PARENT_GONE)
    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
