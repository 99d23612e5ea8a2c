"""Cheap checks that a folder holds a model Engram can run, before any weights are read into memory.

Each failure is a ModelError that says what is wrong in words a person can act on.
"""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from core.errors import ModelError
from models.registry import GB, TOO_BIG, fit, need_for_folder

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model")


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not folder.is_dir():
        raise ModelError(f"{folder} is not a folder.")
    if not path.is_file():
        raise ModelError(f"{folder} is not a model folder: it has no config.json.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"The model's config.json in {folder} cannot be read: {exc}") from exc
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelError(f"{folder} is not a model folder: config.json names no model_type.")
    return config


def check_architecture(config: dict) -> None:
    from models.mlx_loader import model_classes  # the loader's own lookup, so the answer matches what it loads
    try:
        model_classes(config)
    except (ValueError, KeyError) as exc:
        raise ModelError(f"This model's architecture ({config.get('model_type')!r}) is not supported by "
                         f"the installed mlx-lm.") from exc


# Bytes per element of each safetensors dtype; a tensor of another type is refused before MLX reads it.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
MAX_DIMENSION = 2 ** 31 - 1  # MLX holds a dimension in 32 bits: a larger one wraps negative and reads past the file


def check_safetensors(path: Path) -> list[str]:
    """The header parses, every tensor's shape, type and byte range agree with each other and lie inside the file
    (catches truncation); the tensors' names. MLX's native reader trusts the shapes: one of 2**31 × 2**31 with no
    bytes crashed it."""
    try:
        with path.open("rb") as handle:
            raw_length = handle.read(8)
            if len(raw_length) < 8:
                raise ValueError("file is shorter than a header")
            (header_length,) = struct.unpack("<Q", raw_length)
            if header_length > 100 * 1024 * 1024:
                raise ValueError("header length is implausible")
            header = json.loads(handle.read(header_length))
        if not isinstance(header, dict):
            raise ValueError("its header is not a table of tensors")
        data_bytes = path.stat().st_size - 8 - header_length
        names = [name for name in header if name != "__metadata__"]
        for name in names:
            _check_tensor(name, header[name], data_bytes)
        return names
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
        raise ModelError(f"The weights file {path.name} is damaged or incomplete ({exc}). "
                         f"Remove the model and download it again.") from exc


def _check_tensor(name: str, entry: object, data_bytes: int) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"tensor {name!r} has no description")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"tensor {name!r} has an unknown type {dtype!r}")
    if not isinstance(shape, list) or not all(_whole(d) and 0 <= d <= MAX_DIMENSION for d in shape):
        raise ValueError(f"tensor {name!r} has an impossible shape")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_whole(o) for o in offsets):
        raise ValueError(f"tensor {name!r} has no byte range")
    start, end = offsets
    size = DTYPE_BYTES[dtype]
    for dimension in shape:
        size *= dimension
    if not 0 <= start <= end or end - start != size:
        raise ValueError(f"tensor {name!r} needs {size} bytes but its range holds {end - start}")
    if end > data_bytes:
        raise ValueError(f"it has {data_bytes} bytes of tensors but {name!r} ends at {end}")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_fits(folder: Path, budget: int) -> None:
    """Refuse a model past 85% of the memory budget (models.budget): it would swap or fail mid-reply."""
    need = need_for_folder(folder)
    if fit(need, budget) == TOO_BIG:
        raise ModelError(too_big_message(need, budget))


def too_big_message(need: int, budget: int) -> str:
    return (f"This model needs about {need / GB:.1f} GB of memory; Engram can give a model {budget / GB:.1f} GB "
            f"here. Choose a smaller model.")


def check_model_folder(folder: Path | str, *, total_ram: int | None = None) -> dict:
    """All checks that need no model load; returns the config. `total_ram` is the memory budget a model may use
    (models.budget, named for the callers that pass it); None skips the memory check."""
    folder = Path(folder)
    config = read_config(folder)
    check_architecture(config)
    weights = sorted(folder.glob("model*.safetensors"))
    if not weights:
        raise ModelError(f"{folder} has no weights (model*.safetensors).")
    check_layers(config, [name for path in weights for name in check_safetensors(path)])
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(f"{folder} has no tokenizer files.")
    if total_ram is not None:
        check_fits(folder, total_ram)
    return config


LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer")
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
MOST_LAYERS = 1000  # beyond any released model; the bound when the weights name their layers some other way


def check_layers(config: dict, tensor_names: list[str]) -> None:
    """config.json's layer count is no more than the weights hold: building a model of 10**6 layers (one edited
    number) hung the loader for minutes while its memory grew, before any weight could be found missing."""
    held = len({int(m[1]) for name in tensor_names if (m := LAYER_INDEX.search(name))})
    for section in (config, config.get("text_config")):
        for key in LAYER_KEYS:
            said = section.get(key) if isinstance(section, dict) else None
            if isinstance(said, int) and said > (held or MOST_LAYERS):
                raise ModelError(f"The model's config.json says {said} layers but its weights hold {held}: "
                                 "the folder is damaged or its files do not belong together.")


def verify_loads(folder: Path | str, *, speech: bool = True) -> None:
    """Build the model and bind every weight lazily (shapes and names must match, no memory is filled), render its
    chat template, then make it read a short English text in a process of its own (models.speech_check): a model
    whose weights are wrong passes every other check."""
    from models.chat_tokenizer import load_tokenizer
    from models.mlx_loader import load_model, tokenizer_defaults
    folder = Path(folder)
    try:
        model, config = load_model(folder, lazy=True)
        tokenizer = load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"), defaults=tokenizer_defaults(model))
    except Exception as exc:  # mlx-lm raises ValueError, KeyError, RuntimeError... for a bad folder
        raise ModelError(f"The model in {folder} does not load: {exc}") from exc
    finally:
        _drain_mlx()
    del model
    check_tokenizer(tokenizer)
    check_chat_template(tokenizer)
    if speech:
        from models.speech_check import check_speaks
        check_speaks(folder)


# Text a tokenizer must get through: words, and long runs of one character of each kind, where a tokenizer.json
# regex with nested repetition runs past Oniguruma's retry limit and the Rust library panics.
SAMPLE_TEXTS = ("Hello! How are you today? I live in Lisbon and I like tea, 42 times a day.",
                *(run * 64 + end for run, end in (("a", "b"), ("z", "!"), ("1", "x"), (" ", "x"), ("!", "a"),
                                                  ("\n", "x"), ("é", "z"), ("日", "本"), ("-", "_"), (".", ","))))


def check_tokenizer_folder(folder: Path | str) -> None:
    """The folder's tokenizer loads and gets through SAMPLE_TEXTS (check_tokenizer), without building the model."""
    from models.chat_tokenizer import load_tokenizer
    try:
        tokenizer = load_tokenizer(Path(folder))
    except Exception as exc:  # the tokenizers library raises Exception for a file it cannot read
        raise ModelError(f"This model's tokenizer cannot be read: {exc}") from exc
    check_tokenizer(tokenizer)


def check_tokenizer(tokenizer: Any) -> None:
    """The tokenizer gets through sample text, so one that panics is refused when the model is added, not in the
    middle of a chat."""
    for text in SAMPLE_TEXTS:
        try:
            tokenizer.encode(text)
        except ModelError as exc:
            raise ModelError(f"This model cannot be used: its tokenizer fails on sample text ({exc}).") from None
        except BaseException as exc:  # mlx-lm's own tokenizer lets the Rust panic through as it is
            if type(exc).__name__ != "PanicException":
                raise
            raise ModelError("This model cannot be used: its tokenizer fails on sample text "
                             f"({str(exc).strip()[:200]}).") from None


def _drain_mlx() -> None:
    """Finish what building the model queued on this thread's stream. A download checks the model on its own
    thread, which then ends; MLX 0.32 aborted the process at exit ("terminate called without an active exception",
    exit 134) when an ended thread left work on its stream (see models.worker._drain_mlx)."""
    import mlx.core as mx
    mx.synchronize()


SAMPLE_CHAT = ({"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello!"},
               {"role": "assistant", "content": "Hi! How can I help?"}, {"role": "user", "content": "Thanks."})


def check_chat_template(tokenizer: Any) -> None:
    """The chat template renders a conversation as the chat will send it (in time: a template can loop for
    ever), so a model that cannot chat is refused when it is added, not on its first message."""
    from models.prompt_text import control_markers, render_prompt
    try:
        render_prompt(tokenizer, list(SAMPLE_CHAT), control_markers(tokenizer))
    except ModelError as exc:
        raise ModelError("This model cannot chat: its chat template failed on a sample conversation "
                         f"({exc.__cause__ or exc}).") from exc  # the folder's name is a staging one for a GGUF
