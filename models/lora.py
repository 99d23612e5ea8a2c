"""LoRA adapters on an already-loaded base model, through mlx-lm's tuner utilities.

Applying swaps chosen linear layers for LoRA wrappers that keep the original layer; removing puts the
original layer objects back, so the base output is restored exactly. Fusing writes a standalone model.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

from core.errors import ModelError

ADAPTER_FILES = ("adapters.safetensors", "adapter_config.json")


def check_adapter_folder(adapter_dir: Path) -> dict:
    missing = [name for name in ADAPTER_FILES if not (adapter_dir / name).is_file()]
    if missing:
        raise ModelError(f"{adapter_dir} is not an adapter folder: {', '.join(missing)} missing.")
    try:
        config = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"The adapter config in {adapter_dir} cannot be read: {exc}") from exc
    if config.get("fine_tune_type", "lora") != "lora":
        raise ModelError("Only LoRA adapters can be switched on a loaded model.")
    return config


def apply_adapter(model: Any, adapter_dir: Path) -> None:
    """Wrap the base layers with the adapter's LoRA layers; on failure the model is left as it was."""
    from mlx_lm.tuner.utils import load_adapters, remove_lora_layers
    check_adapter_folder(adapter_dir)
    try:
        load_adapters(model, str(adapter_dir))
    except Exception as exc:  # shape mismatch (adapter of another base), unreadable weights...
        remove_lora_layers(model)
        raise ModelError(f"The adapter in {adapter_dir} does not fit this model: {exc}") from exc
    model.eval()


def remove_adapter(model: Any) -> None:
    from mlx_lm.tuner.utils import remove_lora_layers
    remove_lora_layers(model)


def fuse_adapter(base_dir: Path | str, adapter_dir: Path | str, output_dir: Path | str) -> Path:
    """Write base + adapter as one model folder (loadable without the adapter), via a staging folder."""
    from mlx.utils import tree_unflatten
    from mlx_lm import load
    from mlx_lm.utils import save

    base_dir, adapter_dir, output_dir = Path(base_dir), Path(adapter_dir), Path(output_dir)
    check_adapter_folder(adapter_dir)
    if output_dir.exists():
        raise ModelError(f"{output_dir} already exists; choose a new folder for the fused model.")
    loaded: Any = load(str(base_dir), adapter_path=str(adapter_dir), return_config=True)  # a triple, with config
    model, tokenizer, config = loaded
    fused = [(name, module.fuse()) for name, module in model.named_modules() if hasattr(module, "fuse")]
    if fused:
        model.update_modules(tree_unflatten(fused))
    staging = output_dir.with_name(output_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with contextlib.redirect_stdout(io.StringIO()):
        save(staging, base_dir, model, tokenizer, config, donate_model=True)
    staging.rename(output_dir)
    return output_dir
