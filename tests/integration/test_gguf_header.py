"""A GGUF header that lies is refused before anything is built (issue 37 item 2).

`block_count = 10**9` made the converter build layer after layer (10.6 GB in 92 s and growing); a tokenizer with
more tokens than the embedding has rows, and a NaN rope_theta, installed. The checks that guard an MLX folder
(layers, sizes, vocabulary, memory) now run on the header (models.gguf_header), each refusal one line, nothing
written.
"""
from __future__ import annotations

import json

import pytest

from core.errors import ModelError
from models.gguf import convert
from models.gguf_worker import convert_isolated
from models.testing import build_tiny_model
from tests.integration.test_gguf_convert import write_qwen2_gguf

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("header") / "float", quantize_bits=None)


def _refused(tmp_path, float_model, message: str, **hostile) -> None:
    path = tmp_path / "hostile.gguf"
    write_qwen2_gguf(float_model, path, **hostile)
    with pytest.raises(ModelError, match=message) as info:
        convert(path, tmp_path / "out")
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.gguf"]


def test_a_billion_layers_is_refused_from_the_header(tmp_path, float_model):
    _refused(tmp_path, float_model, r"says its model has 1000000000 layers but holds weights for 2",
             changes={"block_count": 10 ** 9})


def test_fewer_layers_than_the_weights_hold_is_refused_too(tmp_path, float_model):
    _refused(tmp_path, float_model, r"says its model has 1 layers but holds weights for 2", changes={"block_count": 1})


@pytest.mark.parametrize("key, value", [("embedding_length", 10 ** 6), ("feed_forward_length", 2 ** 30),
                                        ("attention.head_count", 4096)])
def test_a_size_the_weights_do_not_have_is_refused(tmp_path, float_model, key, value):
    _refused(tmp_path, float_model, r"describes a model its weights do not fit", changes={key: value})


def test_a_tokenizer_with_more_tokens_than_the_embedding_is_refused(tmp_path, float_model):
    rows = json.loads((float_model / "config.json").read_text())["vocab_size"]
    _refused(tmp_path, float_model, rf"tokenizer has {rows + 7} tokens but its model only {rows}", extra_tokens=7)


@pytest.mark.parametrize("theta", [float("nan"), float("inf"), 0.0])
def test_an_impossible_rope_theta_is_refused(tmp_path, float_model, theta):
    _refused(tmp_path, float_model, r"impossible rope_theta", changes={"rope.freq_base": theta})


def test_a_model_past_the_memory_budget_is_refused_before_it_is_read(tmp_path, float_model):
    path = tmp_path / "hostile.gguf"
    write_qwen2_gguf(float_model, path)
    with pytest.raises(ModelError, match=r"This model needs about .* GB of memory; Engram can give a model 0\.5 GB"):
        convert_isolated(path, tmp_path / "out", budget=2 ** 29)  # the worker is told the budget, as the app tells it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.gguf"]
    assert convert(path, tmp_path / "fits", budget=2 ** 34).folder.is_dir()
