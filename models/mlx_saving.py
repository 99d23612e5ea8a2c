"""Quantize and save an MLX model folder as mlx_lm.utils' quantize_model, save_model and save_config write it,
without importing mlx_lm.utils (and transformers with it): `--self-check` builds its tiny model through these.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, cast


def quantize(model: Any, config: dict, *, group_size: int, bits: int) -> dict:
    """Quantize every layer that can be (affine), in place; the config recording it, as mlx-lm's quantize_model."""
    import mlx.nn as nn

    def predicate(path: str, module: Any) -> bool:
        if not hasattr(module, "to_quantized") or module.weight.shape[-1] % group_size != 0:
            return False
        own = getattr(model, "quant_predicate", None)
        return own(path, module) if own is not None else True

    nn.quantize(model, group_size, bits, mode="affine", class_predicate=predicate)
    quantization = {"group_size": group_size, "bits": bits, "mode": "affine"}
    return {**config, "quantization": quantization, "quantization_config": quantization}


def save_model(folder: Path, model: Any) -> None:
    """model.safetensors (MLX metadata) and its index, one shard (the models built here are small)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    folder.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    index = {"metadata": {"total_size": sum(v.nbytes for v in weights.values()),
                          "total_parameters": _parameter_count(model)},
             "weight_map": {name: "model.safetensors" for name in sorted(weights)}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=4), encoding="utf-8")


def save_config(config: dict, path: Path) -> None:
    """config.json with its keys sorted, quantization_config mirroring quantization."""
    config = {k: v for k, v in config.items() if k not in ("_name_or_path", "vision_config")}
    if "quantization" in config:
        config["quantization_config"] = config["quantization"]
    path.write_text(json.dumps(dict(sorted(config.items())), indent=4), encoding="utf-8")


def _parameter_count(model: Any) -> int:
    """Parameters as mlx-lm counts them: a quantized matrix by its unpacked size (get_total_parameters)."""
    import mlx.nn as nn
    from mlx.utils import tree_flatten
    flat = cast(Callable[..., list[tuple[str, Any]]], tree_flatten)  # a list, without `destination`

    def count(module: Any) -> int:
        if hasattr(module, "bits"):
            bias = module.bias.size if hasattr(module, "bias") else 0
            return bias + module.weight.size * 32 // module.bits
        return sum(v.size for _, v in flat(module.parameters()))

    leaves = flat(model.leaf_modules(), is_leaf=lambda m: isinstance(m, nn.Module))
    return sum(count(module) for _, module in leaves)
