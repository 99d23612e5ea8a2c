"""An embedder wrapper that keeps every vector it made in a file, so a rerun of a bench embeds nothing twice.

Opt-in (--cache DIR on the benches) for iterating; a reported wall time is measured without it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np


@dataclass
class CachedEmbedder:
    inner: object  # a core.protocols.Embedder
    path: Path
    _vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path.exists():
            with np.load(self.path) as data:
                self._vectors = dict(zip(data["keys"].tolist(), data["vectors"]))

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [_key(self.name, t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing)):
                self._vectors[_key(self.name, text)] = vector
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._vectors)
        np.savez(self.path, keys=np.array(keys), vectors=np.stack([self._vectors[k] for k in keys]))


def _key(embedder: str, text: str) -> str:
    """By embedder too: two embedders sharing a cache file must never read each other's vectors."""
    return hashlib.sha1(f"{embedder}\0{text}".encode("utf-8")).hexdigest()
