"""A quantized model's linear and embedding layers as float32 on MLX's CPU backend, when that copy fits.

Why: MLX's CPU kernels for quantized products are generic loops, while float32 products run on BLAS
(models/cpu_blas.py). Measured here on SmolLM2-135M (Q4_1 from a GGUF): a 326-token prompt took 31–43 s to read and
each new token 160 ms; one 326×576 by 576×1536 product took 320 ms quantized and 16 ms in float32, and a single
token's 1.6 ms against 0.3 ms. So the first reply sat for most of a minute and learning from one turn took minutes.
The float weights are exactly the values the quantized ones stand for (dequantized, not re-read), so the model is
the same model. A Mac is left alone: Metal's quantized kernels are the fast ones there. Every model keeps its
quantized layers while ENGRAM_KEEP_QUANTIZED is set (read at each load): the Mac-shaped test lane (tests/conftest.py,
--mac-shaped) runs chat, scoring and LoRA through QuantizedLinear and QuantizedEmbedding, as every Mac does.

A model whose float32 copy would not fit the budget (Qwen2.5-1.5B: 7.1 GB, over a quarter of 24 GB) gets a half copy:
linear weights in float16, embeddings in float32. The hidden states stay float32, so each product is float32 by a
float16 matrix, which MLX promotes to a float32 product on BLAS (the cast costs ~3.5× a float32 product; MLX's own
float16 and bfloat16 CPU products are loops, 18× and 16× slower). Measured on one 76×1536 by 1536×8960 product:
float32 87 ms, float16 weights promoted 309 ms, float16 1609 ms, bfloat16 1396 ms, 8-bit quantized 3571 ms, 4-bit 3679
ms. Qwen2.5-Coder-1.5B (8-bit from its Q4_K_M GGUF) reading a prompt, on a shared 2-core machine (bench/gguf_models.py):
quantized 0.21 tokens/s, half copy (4.0 GB) 3.2, float32 (7.1 GB) 5.6. The float32 copy stays bound to a quarter of
memory: training runs in a second process with its own copy beside the app's. Only a model whose half copy does not
fit either keeps its quantized layers.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

BUDGET_SHARE = 0.25  # of this machine's memory, for the float32 copy of the layers swapped


KEEP_QUANTIZED = "ENGRAM_KEEP_QUANTIZED"  # set (not "0"): never swap, as on a Mac


def on_cpu_backend() -> bool:
    import mlx.core as mx
    return mx.default_device().type == mx.cpu


def keeps_quantized(env: Mapping[str, str] | None = None) -> bool:
    """Whether quantized layers are kept as they are here: on Metal, or where ENGRAM_KEEP_QUANTIZED asks for it."""
    env = os.environ if env is None else env
    return env.get(KEEP_QUANTIZED, "0") not in ("", "0") or not on_cpu_backend()


def total_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return 0


def float_bytes(model: Any, *, half: bool = False) -> int:
    """What the swappable layers would take as float32 (with `half`: linear weights as float16)."""
    return _float_size(_swappable(model), half=half)


def dequantize_for_cpu(model: Any, budget: int | None = None) -> int:
    """Swap the model's quantized linear and embedding layers for float ones on the CPU backend — float32, or the
    half copy when only that fits `budget`; the bytes the float layers take (0 when nothing was swapped: on Metal or
    kept by ENGRAM_KEEP_QUANTIZED, no quantized layer, or neither copy fits)."""
    if keeps_quantized():
        return 0
    layers = _swappable(model)
    budget = int(total_memory() * BUDGET_SHARE) if budget is None else budget
    half = _float_size(layers) > budget
    needed = _float_size(layers, half=half)
    if not layers or needed > budget:
        return 0
    import mlx.core as mx
    from mlx.utils import tree_unflatten
    model.update_modules(tree_unflatten([(path, _as_float(layer, half)) for path, layer, _, _ in layers]))
    mx.eval(model.parameters())
    return needed


def _swappable(model: Any) -> list[tuple[str, Any, int, int]]:
    """(path, layer, rows, columns) of each plain quantized Linear or Embedding (mixture-of-experts layers and
    other quantized kinds stay as they are)."""
    import mlx.nn as nn
    found = []
    for path, module in model.named_modules():
        if type(module) in (nn.QuantizedLinear, nn.QuantizedEmbedding):
            rows = int(module.weight.shape[0])
            columns = int(module.weight.shape[1]) * 32 // int(module.bits)
            found.append((path, module, rows, columns))
    return found


def _float_size(layers: list[tuple[str, Any, int, int]], *, half: bool = False) -> int:
    import mlx.nn as nn
    return sum((2 if half and not isinstance(layer, nn.QuantizedEmbedding) else 4) * rows * columns
               for _, layer, rows, columns in layers)


def _as_float(layer: Any, half: bool = False) -> Any:
    import mlx.core as mx
    import mlx.nn as nn
    weight = mx.dequantize(layer.weight, layer.scales, layer.get("biases"), group_size=layer.group_size,
                           bits=layer.bits, mode=getattr(layer, "mode", "affine")).astype(mx.float32)
    rows, columns = weight.shape
    if half and not isinstance(layer, nn.QuantizedEmbedding):  # the embedding stays float32: so do hidden states
        weight = weight.astype(mx.float16)
    if isinstance(layer, nn.QuantizedEmbedding):
        swapped = nn.Embedding(rows, columns)
        swapped.weight = weight
        return swapped
    linear = nn.Linear(columns, rows, bias="bias" in layer)
    linear.weight = weight
    if "bias" in layer:
        linear.bias = layer.bias.astype(mx.float32)
    return linear
