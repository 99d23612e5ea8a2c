"""The benches' embedding cache (bench/embed_cache.py) never hands one embedder's vectors to another."""
from __future__ import annotations

import numpy as np

from bench.embed_cache import CachedEmbedder


class Constant:
    def __init__(self, name: str, value: float) -> None:
        self.name, self.value, self.dimension, self.calls = name, value, 3, 0

    def embed(self, texts):
        self.calls += len(texts)
        return np.full((len(texts), 3), self.value, dtype=np.float32)


def test_two_embedders_sharing_a_cache_file_each_get_their_own_vectors(tmp_path):
    path = tmp_path / "cache.npz"
    first = CachedEmbedder(Constant("a", 1.0), path)
    assert first.embed(["hello", "hello"])[:, 0].tolist() == [1.0, 1.0] and first.inner.calls == 1
    first.save()
    second = CachedEmbedder(Constant("b", 2.0), path)
    assert second.embed(["hello"])[0, 0] == 2.0 and second.inner.calls == 1  # b's own vector, not a's
    again = CachedEmbedder(Constant("a", 9.0), path)
    assert again.embed(["hello"])[0, 0] == 1.0 and again.inner.calls == 0  # a's, from the file
