"""Load an MLX model folder the way `mlx_lm.utils.load_model` does, without importing mlx_lm.utils (and with
it transformers): config.json → the model class for its model_type → ModelArgs → safetensors weights → `sanitize` →
quantized layers as the config records them → load_weights → eval.

The few formats whose weights need repacking on load (AutoAWQ/GPTQ, BitNet) and activation quantization go to
mlx-lm's own loader: they are rare, and importing transformers for them costs only time.
"""
from __future__ import annotations

import glob
import importlib
import inspect
import json
import math
import sys
from pathlib import Path
from typing import Any, cast

from models import mlx_lm_package

# mlx_lm.utils' tables (0.32): a model_type served by another architecture's module. tests/test_mlx_loader.py holds
# them equal to the installed mlx-lm's, so an upgrade that changes them fails a test instead of a user's load.
MODEL_REMAPPING = {
    "mistral": "llama",
    "llava": "mistral3",
    "phi-msft": "phixtral",
    "falcon_mamba": "mamba",
    "joyai_llm_flash": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "qwen2_5_vl": "qwen2_vl",
    "minimax_m2": "minimax",
    "iquestcoder": "llama",
    "xverse": "llama",
    "gemma4_unified": "gemma4",
    "deepseek_v41_text": "deepseek_v41",
}
MODEL_ARCHITECTURE_REMAPPING = {
    ("bailing_hybrid", "BailingMoeV3ForCausalLM"): "bailing_moe_v3",
}
# quantization_config methods that need mlx-lm's weight transforms (or a layer swap) on load
DELEGATED_METHODS = ("bitnet", "awq", "gptq")
_FLOAT_TAGS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def model_classes(config: dict) -> tuple[Any, Any]:
    """(Model, ModelArgs) for a config, by its model_type and the remappings; ValueError if none."""
    model_type = config["model_type"]
    architectures = config.get("architectures") or ()
    if isinstance(architectures, str):
        architectures = (architectures,)
    remapped = next((MODEL_ARCHITECTURE_REMAPPING[(model_type, a)] for a in architectures
                     if (model_type, a) in MODEL_ARCHITECTURE_REMAPPING), None)
    model_type = remapped or MODEL_REMAPPING.get(model_type, model_type)
    mlx_lm_package.install()
    try:
        module = importlib.import_module(f"mlx_lm.models.{model_type}")
    except ImportError as exc:
        raise ValueError(f"Model type {model_type} not supported.") from exc
    return module.Model, module.ModelArgs


def tokenizer_defaults(model: Any) -> dict:
    """The model module's TOKENIZER_DEFAULTS (eos ids, a chat renderer) for checkpoints without them."""
    module = sys.modules.get(type(model).__module__)
    return dict(getattr(module, "TOKENIZER_DEFAULTS", None) or {})


def load_config(folder: Path) -> dict:
    """config.json (non-finite floats as transformers tags them decoded), eos ids from generation_config.json."""
    with open(folder / "config.json", encoding="utf-8") as handle:
        config = _decode_tagged_floats(json.load(handle))
    generation = folder / "generation_config.json"
    if generation.exists():
        try:
            eos = json.loads(generation.read_text(encoding="utf-8")).get("eos_token_id", False)
        except ValueError:
            eos = False
        if eos:
            config["eos_token_id"] = eos
    return config


def load_model(folder: Path | str, *, lazy: bool = False) -> tuple[Any, dict]:
    """(model, config) as mlx_lm.utils.load_model(folder, lazy) gives them."""
    import mlx.core as mx
    folder = Path(folder)
    config = load_config(folder)
    weight_files = glob.glob(str(folder / "model*.safetensors"))
    if not weight_files:
        raise FileNotFoundError(f"No safetensors found in {folder}")
    if config.get("model_file") is not None:
        raise ValueError(f"The model at {folder} requires running a custom module ({config['model_file']!r}) "
                         f"to build its architecture, which Engram does not do.")
    _find_quantization_config(folder, config)
    if _needs_mlx_lm(config):
        from mlx_lm.utils import load_model as mlx_lm_load_model
        return mlx_lm_load_model(folder, lazy)
    weights: dict = {}
    for path in weight_files:
        weights.update(cast(dict[str, Any], mx.load(path)))  # a .safetensors file: a dict
    model_class, args_class = model_classes(config)
    model = model_class(args_class.from_dict(config))
    if hasattr(model, "sanitize"):
        weights = model.sanitize(weights)
    quantization = _quantization(config)
    if quantization is not None:
        _quantize(model, quantization, config["quantization"], weights)
    model.eval()
    model.load_weights(list(weights.items()), strict=True)
    if not lazy:
        mx.eval(model.parameters())
    return model, config


def _find_quantization_config(folder: Path, config: dict) -> None:
    """A multimodal config keeps it in text_config; an NVIDIA ModelOpt export in hf_quant_config.json."""
    if "quantization_config" not in config and "quantization_config" in config.get("text_config", {}):
        config["quantization_config"] = config["text_config"]["quantization_config"]
    hf_quant = folder / "hf_quant_config.json"
    if "quantization_config" not in config and hf_quant.exists():
        config["quantization_config"] = json.loads(hf_quant.read_text(encoding="utf-8"))


def _needs_mlx_lm(config: dict) -> bool:
    if config.get("quantize_activations", False):
        return True
    method = (config.get("quantization_config") or {}).get("quant_method")
    return config.get("quantization") is None and method in DELEGATED_METHODS


def _quantization(config: dict) -> dict | None:
    """The layer-wide quantization to apply, recording a legacy quantization_config as mlx-lm does."""
    if config.get("quantization") is not None:
        return config["quantization"]
    legacy = config.get("quantization_config")
    if not legacy:
        return None
    quantization = _from_legacy(legacy)
    if quantization is not None:
        config["quantization"] = config["quantization_config"] = quantization
    return quantization


def _from_legacy(legacy: dict) -> dict | None:
    method = legacy["quant_method"]
    if method == "mxfp4":
        return {"group_size": 32, "bits": 4, "mode": "mxfp4"}
    if method == "mxfp8" or (method == "fp8" and legacy.get("scale_fmt") == "ue8m0"
                             and list(legacy.get("weight_block_size", ())) == [32, 32]):
        return {"group_size": 32, "bits": 8, "mode": "mxfp8"}
    if method == "compressed-tensors":
        return _compressed_tensors(legacy.get("format"))
    if method == "modelopt":
        settings = legacy.get("quantization", legacy)
        if settings["quant_algo"] != "NVFP4":
            raise ValueError(f"Unsupported modelopt quant_algo: {settings['quant_algo']}")
        return {"group_size": settings.get("group_size", 16), "bits": 4, "mode": "nvfp4"}
    return None  # other fp8 checkpoints dequantize in their model's sanitize


def _compressed_tensors(fmt: str | None) -> dict:
    formats = {"nvfp4-pack-quantized": {"group_size": 16, "bits": 4, "mode": "nvfp4"},
               "mxfp4-pack-quantized": {"group_size": 32, "bits": 4, "mode": "mxfp4"},
               "pack-quantized": {"group_size": 32, "bits": 4, "mode": "affine"}}
    if fmt not in formats:
        raise ValueError(f"unsupported compressed-tensors format {fmt!r}; dequantize to bf16 before converting")
    return dict(formats[fmt])


def _quantize(model: Any, quantization: dict, per_layer: dict, weights: dict) -> None:
    """Swap in quantized layers where the weights are quantized: a layer the config names gets its entry (or
    False), another the packing its saved scales imply."""
    import mlx.nn as nn

    def predicate(path: str, module: Any) -> Any:
        if path in per_layer:
            return per_layer[path]
        if not hasattr(module, "to_quantized") or f"{path}.scales" not in weights:
            return False
        params = infer_quant_config(path, module, weights)
        if f"{path}.global_scale" in weights and "global_scale" in inspect.signature(module.to_quantized).parameters:
            params["global_scale"] = True
        return params

    nn.quantize(model, group_size=quantization["group_size"], bits=quantization["bits"],
                mode=quantization.get("mode", "affine"), class_predicate=predicate)


def infer_quant_config(path: str, module: Any, weights: dict) -> dict:
    """The group size, bits and mode a saved weight was packed with (mlx_lm.utils.infer_quant_config)."""
    import mlx.core as mx
    scales = weights[f"{path}.scales"]
    in_dims = module.weight.shape[-1]
    group_size = in_dims // scales.shape[-1]
    bits = (weights[f"{path}.weight"].shape[-1] * 32) // in_dims
    if scales.dtype != mx.uint8:  # only affine keeps its scales in the weights' dtype
        return {"group_size": group_size, "bits": bits, "mode": "affine"}
    modes = {(4, 16): "nvfp4", (4, 32): "mxfp4", (8, 32): "mxfp8"}
    if (bits, group_size) not in modes:
        raise ValueError(f"Cannot infer the quantization mode of {path}: {bits} bits with group size {group_size}.")
    return {"group_size": group_size, "bits": bits, "mode": modes[(bits, group_size)]}


def _decode_tagged_floats(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__float__"} and value["__float__"] in _FLOAT_TAGS:
            return _FLOAT_TAGS[value["__float__"]]
        return {key: _decode_tagged_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode_tagged_floats(item) for item in value]
    return value
