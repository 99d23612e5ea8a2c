"""Helpers for tests that race real processes on one store."""
from __future__ import annotations

import subprocess
import sys


def at_once(scripts: list[str], *, timeout: float = 120) -> list[str]:
    """Run each script (`python -c`) as its own process and release them together: each prints "ready" once it is
    set up and waits for a line on stdin. Every process must exit 0 (a traceback fails the test with its stderr);
    their stdouts, after "ready", in order."""
    children = [subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for script in scripts]
    for child in children:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=timeout)
        assert child.returncode == 0, err
        outputs.append(out.strip())
    return outputs
