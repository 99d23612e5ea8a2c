"""`engram models add PATH`: a local model folder, or a .gguf file converted to MLX through the same code path as
the Models panel's "Add a GGUF file…" (app.services.gguf_import), with its progress on stderr. The first model added
is the one Engram chats with, as in the app."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from core.errors import InvalidInput

PROGRESS_INTERVAL = 0.5  # seconds between progress lines when stderr is not a terminal


def register(commands: argparse._SubParsersAction, func: Callable[..., int]) -> None:
    add = commands.add_parser("add", help="add a local model: an MLX folder, or a .gguf file (converted to MLX)")
    add.add_argument("path", help="a folder of MLX weights, or a .gguf file (LM Studio's and Jan's format)")
    add.set_defaults(func=func)


def add_model(path_text: str, store: Any, *, stream: TextIO | None = None) -> Any:
    """The installed model for a folder or a .gguf file; InvalidInput in one line for anything else."""
    path = Path(path_text).expanduser()
    if path.is_dir():
        return store.add_folder(path)
    if not path.exists():
        raise InvalidInput(f"there is no file or folder {path_text}")
    if path.suffix.lower() != ".gguf":
        raise InvalidInput(f"{path.name} is neither a model folder nor a .gguf file")
    from app.services.gguf_import import convert_gguf, gguf_supported
    if not gguf_supported():
        raise InvalidInput("this build of Engram cannot convert GGUF files; add a folder of MLX weights instead")
    printer = StagePrinter(stream or sys.stderr, path.name)  # read now: a test (or a pipe) may have replaced it
    try:
        return convert_gguf(store, str(path), printer)
    finally:
        printer.finish()


def gguf_hint(path_text: str) -> str:
    """What `models use FILE.gguf` says: a .gguf is added (converted) first, then chosen by its name."""
    name = Path(path_text).stem
    return (f"{Path(path_text).name} is a GGUF file: add it first with `engram models add {path_text}` (it is "
            f"converted to MLX), then choose it with `engram models use gguf/{name}`")


class StagePrinter:
    """Conversion progress as one line: the stage and its percent (redrawn on a terminal, throttled in a log)."""

    def __init__(self, stream: TextIO, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.name, self.clock = stream, name, clock
        self.redraw = stream.isatty()
        self.last_print = float("-inf")
        self.printed = False

    def __call__(self, stage: str, fraction: float) -> None:
        now = self.clock()
        if not self.redraw and fraction < 1.0 and now - self.last_print < PROGRESS_INTERVAL:
            return
        self.last_print, self.printed = now, True
        line = f"  Converting {self.name} to MLX: {stage} {100.0 * fraction:5.1f}%"
        self.stream.write(f"\r{line}\033[K" if self.redraw else f"{line}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.redraw and self.printed:
            self.stream.write("\n")
            self.stream.flush()
