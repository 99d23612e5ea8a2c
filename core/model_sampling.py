"""Each model's own sampling: temperature, top-p, the longest reply and the context length, as LM Studio and Jan
let a person set them per model.

A model's defaults come from its own files (generation_config.json: temperature, top_p, max_new_tokens;
config.json: the context window it was trained for), over Engram's (Settings.generation) where a file says nothing.
What the user changes is kept per model (the model's reference, as Settings.chat_model names it) in the data
folder's model_settings.json; a value left at the model's default is not stored, so a model that changes its
defaults is followed. Plain Python: read and written by the app's Models panel, used by the chat engine.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from core.config import GenerationSettings
from core.errors import InvalidInput

MODEL_SETTINGS_FILENAME = "model_settings.json"
MIN_CONTEXT = 1024  # room for the system prompt (its notes on memory), a few notes and a short reply
MAX_TEMPERATURE = 2.0


@dataclass(frozen=True)
class ModelSampling:
    temperature: float
    top_p: float
    max_tokens: int  # the longest reply, in tokens
    context_tokens: int  # how much of the conversation and memory the model reads at once

    def applied_to(self, generation: GenerationSettings) -> GenerationSettings:
        return replace(generation, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                       context_tokens=self.context_tokens)


def model_window(folder: Path | None) -> int | None:
    """The context the model was trained for (config.json), None when its files do not say."""
    config = _json(folder / "config.json") if folder is not None else {}
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_defaults(folder: Path | None, engram: GenerationSettings) -> ModelSampling:
    """What the model's own generation config asks for, Engram's defaults where it is silent; the context is
    Engram's default, never more than the model's window."""
    config = _json(folder / "generation_config.json") if folder is not None else {}
    temperature = _number(config.get("temperature"), engram.temperature, 0.0, MAX_TEMPERATURE)
    top_p = _number(config.get("top_p"), engram.top_p, 0.01, 1.0)
    if not config.get("do_sample", True):
        temperature = 0.0  # the model asks for greedy decoding
    window = model_window(folder)
    context = min(engram.context_tokens, window) if window else engram.context_tokens
    max_tokens = int(_number(config.get("max_new_tokens"), engram.max_tokens, 1, context // 2))
    return ModelSampling(round(temperature, 3), round(top_p, 3), max_tokens, context)


def model_sampling(data_dir: Path, ref: str, folder: Path | None, engram: GenerationSettings) -> ModelSampling:
    """The sampling a reply of this model uses: the user's values over the model's defaults."""
    defaults = model_defaults(folder, engram)
    saved = _saved(data_dir).get(ref)
    if not isinstance(saved, Mapping):
        return defaults
    try:
        return checked({**asdict(defaults), **{k: v for k, v in saved.items() if k in _FIELDS}},
                       model_window(folder))
    except InvalidInput:
        return defaults  # a hand-edited file with a bad value: the model's defaults, the file left as it is


def save_model_sampling(data_dir: Path, ref: str, folder: Path | None, engram: GenerationSettings,
                        values: Mapping[str, Any]) -> ModelSampling:
    """Check and keep the user's values for this model (only those that differ from its defaults); InvalidInput
    in one line, nothing written, when one is out of range."""
    if not ref:
        raise InvalidInput("Choose a model first.")
    defaults = model_defaults(folder, engram)
    chosen = checked({**asdict(defaults), **dict(values)}, model_window(folder))
    kept = {k: v for k, v in asdict(chosen).items() if v != getattr(defaults, k)}
    everything = _saved(data_dir)
    if kept:
        everything[ref] = kept
    else:
        everything.pop(ref, None)
    _write(data_dir / MODEL_SETTINGS_FILENAME, everything)
    return chosen


def checked(values: Mapping[str, Any], window: int | None) -> ModelSampling:
    """The four values, each in its range (the longest reply at most half the context), or InvalidInput."""
    temperature = _ranged(values.get("temperature"), "Temperature", 0.0, MAX_TEMPERATURE)
    top_p = _ranged(values.get("top_p"), "Top-p", 0.01, 1.0)
    top = window or 1 << 20
    context = int(_ranged(values.get("context_tokens"), "Context length", min(MIN_CONTEXT, top), top))
    max_tokens = int(_ranged(values.get("max_tokens"), "Maximum reply length", 1, context // 2))
    return ModelSampling(temperature, top_p, max_tokens, context)


_FIELDS = {f.name for f in fields(ModelSampling)}


def _ranged(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidInput(f"{name} must be a number.")
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low:g} and {high:g}.")
    return value


def _number(value: Any, fallback: float, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return fallback
    return min(max(float(value), low), high)


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _saved(data_dir: Path) -> dict:
    return _json(Path(data_dir) / MODEL_SETTINGS_FILENAME)


def _write(path: Path, data: dict) -> None:
    """Whole or not at all: a crash mid-write leaves the previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".model_settings.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
