"""`engram --self-check`: proves this install (source or frozen bundle) can do its real work, offline.

Each step runs the same code the app runs: a temporary store with sqlite-vec, the bundled embedder with a
vector recall, a tiny MLX model built here and loaded by the chat engine, a few streamed tokens, and one
schema-constrained JSON object. It prints one line per step and `OK` with the versions; any failure exits
non-zero. Nothing is downloaded and the user's own data folder is never opened.
"""
from __future__ import annotations

import importlib.metadata
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24},
                   "likes": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
                   "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
    "required": ["city", "likes", "confidence"],
    "additionalProperties": False,
}
FACTS = ("Ana lives in Lisbon and works as a nurse.",
         "Ana's dog is called Biscuit.",
         "Ana drinks green tea every morning.")
QUESTION = "What is the name of Ana's dog?"
PACKAGES = ("mlx", "mlx-lm", "apsw", "sqlite-vec", "llguidance", "tokenizers", "transformers", "PySide6-Essentials")


@dataclass
class Context:
    """What the steps share: a scratch folder and the objects earlier steps made."""
    folder: Path
    db: Any = None
    embedder: Any = None
    engine: Any = None


def check_resources(ctx: Context) -> str:
    from app.services.resources import APP_ICON, resource_path
    return f"{APP_ICON} at {resource_path(APP_ICON).parent}"


def check_mlx(ctx: Context) -> str:
    from models.mlx_requirements import require_mlx
    return f"MLX {require_mlx()} has what Engram calls"


def check_store(ctx: Context) -> str:
    from core.store.db import open_db
    ctx.db = open_db(ctx.folder / "engram.db")
    version = ctx.db.scalar("SELECT vec_version()")
    return f"schema v{ctx.db.schema_version()}, sqlite {ctx.db.scalar('SELECT sqlite_version()')}, sqlite-vec {version}"


def check_recall(ctx: Context) -> str:
    from core.memory.index import index_memories
    from core.memory.recall import recall
    from core.store.memories import add_memory
    from models.embeddings import load_embedder
    ctx.embedder = load_embedder("all-MiniLM-L6-v2")
    ids = [add_memory(ctx.db, fact) for fact in FACTS]
    index_memories(ctx.db, ctx.embedder, ids)
    hits = recall(ctx.db, ctx.embedder, QUESTION, k=1, kinds=("memory",)).hits
    if not hits or hits[0].id != ids[1]:
        raise AssertionError(f"recall of {QUESTION!r} found {hits}, expected memory #{ids[1]}")
    runtime = getattr(ctx.embedder, "backend", "sentence-transformers")
    return (f"{ctx.embedder.name} ({ctx.embedder.dimension} dims, {runtime}) recalled memory #{ids[1]} "
            f"({hits[0].why})")


def check_metal(ctx: Context) -> str:
    """On a Mac: a GPU computation, which needs mlx.metallib found next to libmlx (the classic bundle failure)."""
    import mlx.core as mx
    if not mx.metal.is_available():
        return "no Metal device on this machine; MLX runs on the CPU"
    x = mx.ones((64, 64), stream=mx.gpu)
    total = mx.sum(x @ x, stream=mx.gpu).item()  # a real number here: the sum of real ones
    if total != 64.0 ** 3:
        raise AssertionError(f"a GPU matrix product gave {total}, expected {64.0 ** 3}")
    return f"GPU kernels load ({mx.device_info().get('device_name', 'Metal')})"  # mx.metal's is deprecated


def check_model(ctx: Context) -> str:
    from models.chat import ChatEngine
    from models.testing import TinyModelSpec, build_tiny_model
    # A short training text: the default's 2,000 lines cost 50 ms of a one-second check and prove nothing more.
    folder = build_tiny_model(ctx.folder / "tiny-4bit", TinyModelSpec(corpus_lines=300))
    ctx.engine = ChatEngine.load(folder, context_tokens=1024)
    return f"tiny 4-bit {ctx.engine.path.name} loaded on {_mlx_device()}"


def check_stream(ctx: Context) -> str:
    from core.protocols import ChatMessage, SamplingParams
    chunks = list(ctx.engine.stream([ChatMessage("user", "hello")], SamplingParams.greedy(8)))
    if not chunks or chunks[-1].finish_reason not in ("stop", "length"):
        raise AssertionError(f"the stream ended without a finish reason: {chunks[-1:]}")
    return f"{chunks[-1].generation_tokens} tokens streamed ({chunks[-1].tokens_per_second:.0f} tokens/s)"


def check_structured(ctx: Context) -> str:
    from core.protocols import ChatMessage
    from models.structured import StructuredGenerator
    value = StructuredGenerator(ctx.engine).generate_json([ChatMessage("user", "Where does Ana live?")], SCHEMA,
                                                          max_tokens=200)
    problems = schema_problems(value)
    if problems:
        raise AssertionError(f"the object {value!r} breaks the schema: {problems}")
    return f"schema-valid object with keys {sorted(value)}"


def check_qt(ctx: Context) -> str:
    import os
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # the check needs Qt's libraries, not a screen
    from PySide6 import __version__ as pyside_version
    from PySide6.QtGui import QGuiApplication
    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])
    platform = app.platformName() if isinstance(app, QGuiApplication) else "none (a non-GUI Qt application runs)"
    return f"PySide6 {pyside_version}, platform {platform}"


def schema_problems(value: Any) -> list[str]:
    """The ways `value` breaks SCHEMA (no jsonschema at run time; the schema is small and fixed)."""
    if not isinstance(value, dict):
        return ["not an object"]
    problems = [f"missing {key}" for key in SCHEMA["required"] if key not in value]
    problems += [f"unexpected {key}" for key in value if key not in SCHEMA["properties"]]
    if not isinstance(value.get("city"), str) or len(value.get("city", "")) > 24:
        problems.append("city")
    likes = value.get("likes")
    if not isinstance(likes, list) or len(likes) > 3 or not all(isinstance(x, str) and len(x) <= 12 for x in likes):
        problems.append("likes")
    confidence = value.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, int) or not 0 <= confidence <= 100:
        problems.append("confidence")
    return problems


STEPS: tuple[tuple[str, Callable[[Context], str]], ...] = (
    ("resources", check_resources),
    ("mlx", check_mlx),
    ("store", check_store),
    ("embed+recall", check_recall),
    *((("metal", check_metal),) if sys.platform == "darwin" else ()),
    ("mlx model", check_model),
    ("stream", check_stream),
    ("structured", check_structured),
    ("qt", check_qt),
)


def versions() -> dict[str, str]:
    from app.services.resources import engram_version
    found = {"engram": engram_version(), "python": platform.python_version(),
             "platform": f"{sys.platform}-{platform.machine()}"}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "?"
    return found


def run_self_check(out: TextIO | None = None) -> int:
    """Run every step in order; 0 when all pass, 1 at the first failure (the rest are skipped)."""
    out = out or sys.stdout
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-selfcheck-") as tmp:
        ctx = Context(folder=Path(tmp))
        try:
            for name, step in STEPS:
                step_started = time.perf_counter()
                try:
                    detail = step(ctx)
                except Exception as exc:  # any failure is the answer: report it and stop
                    if _explained(exc):  # a failure foreseen and said in words: its line is the whole answer
                        print(f"FAIL {name}: {exc}", file=out)
                        return 1
                    print(f"FAIL {name}: {type(exc).__name__}: {exc}", file=out)
                    traceback.print_exc(file=sys.stderr)
                    return 1
                print(f"  ok {name:<13} {detail} [{time.perf_counter() - step_started:.1f}s]", file=out)
        finally:
            _close(ctx)
    listed = " ".join(f"{name}={value}" for name, value in versions().items())
    print(f"OK engram self-check passed in {time.perf_counter() - started:.1f}s: {listed}", file=out)
    return 0


def _explained(exc: Exception) -> bool:
    from models.mlx_requirements import MLXTooOld
    return isinstance(exc, MLXTooOld)


def _close(ctx: Context) -> None:
    if ctx.engine is not None:
        ctx.engine.unload()
    if ctx.db is not None:
        ctx.db.close()


def _mlx_device() -> str:
    import mlx.core as mx
    return str(mx.default_device())
