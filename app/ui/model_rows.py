"""The Models table's rows in words: columns, sizes, progress, a model's row outside the curated list, its status,
and the GGUF conversion behind "Add a GGUF file…" (plain functions the panel calls off and on the GUI thread).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.services.gguf_import import convert_gguf, gguf_supported  # noqa: F401 - the panel's names
from app.services.platform import this_machine

GB = 1024 ** 3


def columns() -> tuple[str, ...]:
    return ("Model", "Family", "Parameters", "Size", "Context", "Memory needed",
            f"On {this_machine()}", "Status", "Speed here")  # estimated tokens a second (models.speed)


def human_bytes(count: float) -> str:
    for unit, size in (("GB", GB), ("MB", 1024 ** 2), ("KB", 1024)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{int(count)} B"


def progress_text(p: Any) -> str:
    eta = "" if p.eta_seconds is None else f", about {int(p.eta_seconds // 60)} min {int(p.eta_seconds % 60)} s left"
    return (f"{human_bytes(p.done_bytes)} of {human_bytes(p.total_bytes)} at "
            f"{human_bytes(p.bytes_per_second)}/s{eta}")


FIT_COLUMN, STATUS_COLUMN = 6, 7


def other_row(model: Any, budget: int) -> tuple[str, ...]:
    """The table's values for a model outside the curated list: a folder the user added, or a repo id."""
    from models.registry import fit, need_for_folder
    try:
        config = json.loads((model.path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    context = config.get("max_position_embeddings")
    need = need_for_folder(model.path)
    name = model.name if model.local else model.repo_id.rsplit("/", 1)[-1]
    return (name, str(config.get("model_type", "")), parameters_text(model.path), human_bytes(model.size_bytes),
            f"{context:,}" if isinstance(context, int) else "", human_bytes(need), fit(need, budget), "")


def parameters_text(folder: Path) -> str:
    """The parameter count mlx-lm records beside sharded weights ("135M", "1.2B"); '' when it is not there."""
    try:
        index = json.loads((Path(folder) / "model.safetensors.index.json").read_text(encoding="utf-8"))
        count = int(index["metadata"]["total_parameters"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f"{count / 1e9:.1f}B" if count >= 1e9 else f"{count / 1e6:.0f}M"


def status_text(status: str, recommended: bool) -> str:
    if not recommended:
        return status
    return f"{status} · Recommended" if status else "Recommended"


