"""models.mlx_loader builds the model mlx_lm.utils.load_model builds: the same classes, config and logits."""
from __future__ import annotations

import contextlib
import io
import json

import mlx.core as mx
import pytest

from core.errors import ModelError
from models.checks import check_model_folder
from models.mlx_loader import MODEL_ARCHITECTURE_REMAPPING, MODEL_REMAPPING, load_model, model_classes
from models.testing import TinyModelSpec, build_tiny_model

PROMPT = [[5, 17, 42, 99, 3, 250, 7, 64, 128, 11]]


def _reference(folder, lazy=False):
    from mlx_lm.utils import load_model as mlx_lm_load_model
    return mlx_lm_load_model(folder, lazy)


def _same_model(folder, *, lazy=False):
    ours, our_config = load_model(folder, lazy=lazy)
    theirs, their_config = _reference(folder, lazy)
    assert our_config == their_config
    assert type(ours) is type(theirs)
    assert mx.array_equal(ours(mx.array(PROMPT)), theirs(mx.array(PROMPT))).item()


def test_the_remapping_tables_are_mlx_lms():
    from mlx_lm import utils
    assert MODEL_REMAPPING == utils.MODEL_REMAPPING
    assert MODEL_ARCHITECTURE_REMAPPING == utils.MODEL_ARCHITECTURE_REMAPPING


@pytest.mark.parametrize("config", [{"model_type": "qwen2"}, {"model_type": "mistral"}, {"model_type": "llama"},
                                    {"model_type": "gemma3_text"},
                                    {"model_type": "bailing_hybrid", "architectures": ["BailingMoeV3ForCausalLM"]}])
def test_a_config_finds_the_classes_mlx_lm_finds(config):
    from mlx_lm.utils import _get_classes
    assert model_classes(config) == _get_classes(config)


def test_an_unknown_architecture_is_refused_by_the_folder_check(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="not supported"):
        model_classes({"model_type": "no_such_model"})
    folder = tmp_path / "odd"
    folder.mkdir()
    for path in tiny_model_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "no_such_model"}))
    with pytest.raises(ModelError, match="not supported by the installed mlx-lm"):
        check_model_folder(folder)


def test_the_tiny_4bit_model_loads_the_same(tiny_model_dir):
    _same_model(tiny_model_dir)
    _same_model(tiny_model_dir, lazy=True)


def test_an_unquantized_model_loads_the_same(tmp_path):
    _same_model(build_tiny_model(tmp_path / "tiny-f32", TinyModelSpec(corpus_lines=300), quantize_bits=None))


def test_per_layer_quantization_loads_the_same(tmp_path, tiny_model_dir):
    """A config naming some layers' own bits (as mixed-precision conversions write it) and one left unquantized."""
    from mlx_lm.models import qwen2
    from mlx_lm.utils import quantize_model, save_config, save_model
    config = json.loads((tiny_model_dir / "config.json").read_text())
    for key in ("quantization", "quantization_config"):
        config.pop(key)
    model = qwen2.Model(qwen2.ModelArgs.from_dict(config))

    def predicate(path, module):
        if path.endswith("mlp.down_proj"):
            return False
        return {"group_size": 32, "bits": 8, "mode": "affine"} if "self_attn" in path else True

    with contextlib.redirect_stdout(io.StringIO()):
        model, config = quantize_model(model, config, group_size=64, bits=4, quant_predicate=predicate)
    folder = tmp_path / "mixed"
    save_model(folder, model)
    save_config(config, folder / "config.json")
    assert any(isinstance(v, dict) and v.get("bits") == 8 for v in config["quantization"].values())
    _same_model(folder)


def test_eos_ids_from_generation_config_are_taken_as_mlx_lm_takes_them(tmp_path, tiny_model_dir):
    folder = tmp_path / "with-generation-config"
    folder.mkdir()
    for path in tiny_model_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    model, config = load_model(folder)
    assert config["eos_token_id"] == [2, 0] == _reference(folder)[1]["eos_token_id"]


def test_the_real_model_loads_the_same(real_model_dir):
    _same_model(real_model_dir)
