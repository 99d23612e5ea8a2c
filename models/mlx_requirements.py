"""The MLX that Engram's code calls, checked before it is needed (issue 36.4).

An older mlx imports fine and fails later, at the first reply, with an AttributeError from models/generation.py.
The window, the chat engine and `--self-check` ask here first, so a user on an older mlx reads one line saying
which version is needed and which is installed. pyproject.toml's floors are these versions: the code calls mlx
0.31.2's API, and every mlx-lm Engram's tests pass with (0.32.x; not 0.31.3) needs mlx 0.32.2 on a Mac.
"""
from __future__ import annotations

import importlib.metadata
import re
import sys
from typing import Any

from core.errors import ModelError

MINIMUM_MLX = "0.32.2"  # what mlx-lm 0.32.x requires on a Mac
MINIMUM_MLX_LM = "0.32.2"  # the release Engram is tested with; 5 of the 56 model tests fail with 0.31.3
# What the code calls on mlx.core, and the mlx release that added it
REQUIRED = (("new_thread_local_stream", "0.31.2"),  # models/generation.new_stream
            ("device_info", "0.30.4"))  # models/generation.wired_limit


class MLXTooOld(ModelError):
    """The installed mlx lacks a function Engram calls; the message names the version needed."""


def mlx_problem(mx: Any = None) -> str | None:
    """None when this mlx has everything in REQUIRED; else one line naming the version needed and the one here."""
    if mx is None:
        import mlx.core as mx
    missing = [name for name, _ in REQUIRED if not hasattr(mx, name)]
    if not missing:
        return None
    version = getattr(mx, "__version__", "unknown")
    return (f"Engram needs MLX {MINIMUM_MLX} or newer; this is {version} (it has no mx.{missing[0]}) — "
            f"update it: pip install -U \"mlx>={MINIMUM_MLX}\" \"mlx-lm>={MINIMUM_MLX_LM}\"")


def installed_mlx_problem() -> str | None:
    """mlx_problem at the window's start without importing MLX (the window would wait for it): an mlx already
    imported is asked itself; otherwise its installed version, read from its metadata, against REQUIRED. Where no
    metadata is found (a bundle that left it out) it says nothing: ChatEngine.load still asks mlx itself."""
    loaded = sys.modules.get("mlx.core")
    if loaded is not None:
        return mlx_problem(loaded)
    try:
        version = importlib.metadata.version("mlx")
    except importlib.metadata.PackageNotFoundError:
        return None
    needed = max((v for _, v in REQUIRED), key=_release)
    if _release(version) >= _release(needed):
        return None
    return (f"Engram needs MLX {MINIMUM_MLX} or newer; this is {version} — "
            f"update it: pip install -U \"mlx>={MINIMUM_MLX}\" \"mlx-lm>={MINIMUM_MLX_LM}\"")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def require_mlx(mx: Any = None) -> str:
    """This mlx's version when it has what Engram calls; MLXTooOld (one line) when it does not."""
    problem = mlx_problem(mx)
    if problem:
        raise MLXTooOld(problem)
    if mx is None:
        import mlx.core as mx
    return str(mx.__version__)
