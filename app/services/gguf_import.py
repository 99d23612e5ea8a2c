"""Adding a .gguf file (LM Studio's and Jan's format) as an MLX model: one code path for the Models panel's "Add a
GGUF file…", a file dropped on the window and `engram models add FILE.gguf`."""
from __future__ import annotations

import importlib.util
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable


def gguf_supported() -> bool:
    """models/gguf.py converts GGUF files to MLX; a build without it offers MLX folders only."""
    return importlib.util.find_spec("models.gguf") is not None


def convert_gguf(store: Any, gguf_path: str, progress: Callable[[str, float], None]) -> Any:
    """Convert a .gguf file into an MLX folder in the store's staging area and install it like a download (the
    same checks, the same rename into place); the user's file is only read."""
    from models.download import STAGING
    from models.gguf_worker import convert_isolated  # a file that crashes the GGUF reader must not close the app
    staging = store.root / STAGING / f"gguf-{uuid.uuid4().hex}"
    staging.parent.mkdir(parents=True, exist_ok=True)
    convert_isolated(gguf_path, staging, progress=progress, budget=store.total_ram)
    try:
        return store.install(staging, repo_id=f"gguf/{Path(gguf_path).stem}")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a converted folder that fails the checks is not kept
        raise
