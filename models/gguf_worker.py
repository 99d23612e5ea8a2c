"""Convert a user's .gguf file in a process of its own: `python -m models.gguf_worker GGUF OUT`.

MLX's GGUF reader is native code, and a damaged or hostile file (a huge tensor or key count, a flipped byte in the
metadata) makes it crash the process — found by feeding it corrupted copies of a real model. In the app's own
process that would close the window with whatever it was doing; here only this worker dies, and the app says the
file could not be read. The worker prints one JSON event a line on stdout: progress, then done or error.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from core.errors import ModelError
from models.gguf import Converted, Progress, convert
from models.parent_guard import child_env, stop_with_parent

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGING_PREFIX = ".converting-"  # the folder convert() writes in before it renames it into place


def convert_isolated(gguf_path: Path | str, out_dir: Path | str, *, progress: Progress | None = None,
                     python: str = sys.executable, budget: int | None = None) -> Converted:
    """convert() in a worker process: the same folder, progress and ModelErrors, and a crash of the reader is a
    ModelError too, with nothing left behind. `budget`: the memory a model may use, checked on the header."""
    # absolute: the worker runs in the repository's folder, where a path relative to the caller's means nothing
    gguf_path, out_dir = Path(gguf_path).expanduser().absolute(), Path(out_dir).expanduser().absolute()
    report = progress or (lambda stage, fraction: None)
    before = _staging_folders(out_dir.parent)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errors:
        command = [python, "-m", "models.gguf_worker", str(gguf_path), str(out_dir)]
        command += [f"--budget={int(budget)}"] if budget is not None else []
        proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=errors, text=True,
                                encoding="utf-8", env=child_env())
        try:
            outcome = _follow(proc.stdout, report)
        except BaseException:
            proc.kill()  # the caller is gone (a progress report failed): no conversion left running for nobody
            raise
        finally:
            code = proc.wait()
        errors.seek(0)
        last_words = errors.read().strip().splitlines()[-1:] or [""]
    if code == 0 and outcome.get("event") == "done":
        return Converted(out_dir, outcome["architecture"], int(outcome["parameters"]), outcome["bits"])
    _remove_new_staging(out_dir.parent, before)
    if outcome.get("event") == "error":
        raise ModelError(str(outcome["message"]))
    raise ModelError(crash_message(gguf_path.name, code, last_words[0]))


def crash_message(name: str, code: int, last_words: str = "") -> str:
    """A person's words for a worker that died without saying why (a signal) or said it only on stderr."""
    how = "crashed on it" if code < 0 else "stopped" + (f" ({last_words})" if last_words else "")
    return (f"{name} could not be read: the GGUF reader {how}. The file is damaged or not a model Engram can read; "
            "nothing was installed.")


def _follow(stream: IO[str] | None, report: Progress) -> dict[str, Any]:
    """Forward progress events; the last done or error event (an empty dict if the worker said neither)."""
    outcome: dict[str, Any] = {}
    for line in stream or ():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a library's print on stdout is not an event
        if not isinstance(event, dict):
            continue
        if event.get("event") == "progress":
            report(str(event.get("stage", "")), float(event.get("fraction", 0.0)))
        elif event.get("event") in ("done", "error"):
            outcome = event
    return outcome


def _staging_folders(parent: Path) -> set[Path]:
    return set(parent.glob(STAGING_PREFIX + "*")) if parent.is_dir() else set()


def _remove_new_staging(parent: Path, before: set[Path]) -> None:
    """A worker that crashed while writing leaves its half-written folder: it goes (ours alone, made after `before`)."""
    for folder in _staging_folders(parent) - before:
        shutil.rmtree(folder, ignore_errors=True)


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main(argv: list[str]) -> int:
    stop_with_parent()  # first: a conversion whose app is gone (killed, even while this started) stops
    budget = next((int(arg.split("=", 1)[1]) for arg in argv[2:] if arg.startswith("--budget=")), None)
    if len(argv) not in (2, 3) or (len(argv) == 3 and budget is None):
        _emit("error", message="usage: python -m models.gguf_worker GGUF OUT [--budget=BYTES]")
        return 2
    from models.cpu_blas import preload_fast_blas
    from models.mlx_lm_package import keep_torch_out
    preload_fast_blas()  # before mlx loads, as in the app
    keep_torch_out()  # mlx-lm's saving imports transformers, which would import torch (the `st` extra) for nothing
    try:
        done = convert(argv[0], argv[1], budget=budget,
                       progress=lambda stage, fraction: _emit("progress", stage=stage, fraction=fraction))
    except ModelError as exc:
        _emit("error", message=str(exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - said to the app in one line, as any refused file is
        _emit("error", message=f"{Path(argv[0]).name} could not be converted: {type(exc).__name__}: {exc}")
        return 1
    _emit("done", architecture=done.architecture, parameters=done.parameters, bits=done.bits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
