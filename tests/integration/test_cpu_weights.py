"""A quantized model on MLX's CPU backend runs on float32 layers (models/cpu_weights.py): the same values, BLAS
products instead of the quantized kernels' loops. Seen in a real window: SmolLM2 added from its GGUF (8-bit) read a
reply's prompt for most of a minute and took minutes over one turn's facts."""
from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from core.protocols import ChatMessage, SamplingParams
from models.chat import ChatEngine
from models.cpu_weights import dequantize_for_cpu, float_bytes
from models.mlx_loader import load_model


def _kinds(model) -> set[type]:
    return {type(m) for _, m in model.named_modules()
            if type(m) in (nn.Linear, nn.Embedding, nn.QuantizedLinear, nn.QuantizedEmbedding)}


def test_the_engine_runs_a_quantized_folder_on_float_layers_of_the_same_values(tiny_model_dir):
    quantized, _ = load_model(tiny_model_dir)
    assert nn.QuantizedLinear in _kinds(quantized)
    engine = ChatEngine.load(tiny_model_dir, context_tokens=512)
    try:
        model = engine.run(lambda model, tokenizer: model)
        assert _kinds(model) <= {nn.Linear, nn.Embedding}  # every quantized layer swapped
        ids = mx.array([[3, 17, 42, 7, 99, 5]])
        expected, got = quantized(ids), model(ids)
        assert float(mx.max(mx.abs(expected - got))) < 1e-2 * float(mx.max(mx.abs(expected)))
        reply = "".join(c.text for c in engine.stream([ChatMessage("user", "hello")], SamplingParams.greedy(8)))
        assert isinstance(reply, str)  # it still generates
    finally:
        engine.unload()


def test_a_model_whose_float_copy_would_not_fit_keeps_its_quantized_layers(tiny_model_dir):
    model, _ = load_model(tiny_model_dir)
    needed = float_bytes(model)
    assert needed > 0
    assert dequantize_for_cpu(model, budget=float_bytes(model, half=True) - 1) == 0
    assert nn.QuantizedLinear in _kinds(model)
    assert dequantize_for_cpu(model, budget=needed) == needed and nn.QuantizedLinear not in _kinds(model)
    assert dequantize_for_cpu(model) == 0  # nothing left to swap


def test_a_model_whose_float32_copy_would_not_fit_runs_on_a_half_copy(tiny_model_dir):
    """The 1.5B case: float16 linear weights, float32 embeddings, so every product is float32 × float16, which MLX
    runs as a float32 product (its own float16 CPU product is a loop, 18 times slower)."""
    quantized, _ = load_model(tiny_model_dir)
    model, _ = load_model(tiny_model_dir)
    full, half = float_bytes(model), float_bytes(model, half=True)
    assert half < full
    assert dequantize_for_cpu(model, budget=half - 1) == 0 and nn.QuantizedLinear in _kinds(model)
    assert dequantize_for_cpu(model, budget=full - 1) == half
    kinds = {type(m): m.weight.dtype for _, m in model.named_modules() if type(m) in (nn.Linear, nn.Embedding)}
    assert kinds == {nn.Linear: mx.float16, nn.Embedding: mx.float32}
    ids = mx.array([[3, 17, 42, 7, 99, 5]])
    expected, got = quantized(ids), model(ids)
    assert got.dtype == mx.float32
    assert float(mx.max(mx.abs(expected - got))) < 1e-2 * float(mx.max(mx.abs(expected)))
