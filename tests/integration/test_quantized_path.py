"""What every Mac runs: chat, LoRA and scoring through QuantizedLinear and QuantizedEmbedding (issue 36.11). Linux
swaps them for float32 layers (models/cpu_weights.py); ENGRAM_KEEP_QUANTIZED, read at each load, keeps them, so
this file runs the quantized path in the main suite, and the Mac-shaped lane (tests/mac_shaped.py) runs the chat,
LoRA and fine-tune tests through it too."""
from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn
import pytest

from core.protocols import ChatMessage, SamplingParams
from models.chat import ChatEngine
from models.cpu_weights import KEEP_QUANTIZED, dequantize_for_cpu, keeps_quantized
from models.mlx_loader import load_model
from models.testing import write_random_adapter

MESSAGES = [ChatMessage("user", "what do I like to drink?")]
QUANTIZED = (nn.QuantizedLinear, nn.QuantizedEmbedding)


def _kinds(model) -> set[type]:
    return {type(m) for _, m in model.named_modules() if type(m) in (nn.Linear, nn.Embedding, *QUANTIZED)}


@pytest.fixture
def kept(monkeypatch):
    monkeypatch.setenv(KEEP_QUANTIZED, "1")


def test_the_setting_is_read_at_each_load_not_at_import(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(KEEP_QUANTIZED, "1")
    model, _ = load_model(tiny_model_dir)
    assert keeps_quantized() and dequantize_for_cpu(model) == 0 and set(QUANTIZED) <= _kinds(model)
    monkeypatch.setenv(KEEP_QUANTIZED, "0")
    assert keeps_quantized() is False  # this machine's MLX runs on the CPU
    assert dequantize_for_cpu(model) > 0 and _kinds(model) <= {nn.Linear, nn.Embedding}


def test_chat_and_lora_run_through_the_quantized_layers(kept, tiny_model_dir, tiny_engine, tmp_path):
    engine = ChatEngine.load(tiny_model_dir, worker=tiny_engine.worker, context_tokens=1024)
    try:
        model = engine.run(lambda model, tokenizer: model)
        assert set(QUANTIZED) <= _kinds(model)
        chunks = list(engine.stream(MESSAGES, SamplingParams.greedy(8)))
        assert chunks[-1].generation_tokens == 8
        base = list(engine.last_reply_tokens)
        prompt = engine.render(MESSAGES)

        def last_logits(model, tokenizer):
            return model(mx.array(prompt)[None])[0, -1].tolist()
        plain = engine.run(last_logits)
        engine.load_adapter(write_random_adapter(tiny_model_dir, tmp_path / "adapter", seed=3))
        wrapped = engine.run(lambda model, tokenizer: {type(m.linear) for _, m in model.named_modules()
                                                       if hasattr(m, "lora_a")})
        assert wrapped == {nn.QuantizedLinear}  # the adapter sits on the quantized layers, as on a Mac
        assert engine.run(last_logits) != plain
        engine.remove_adapter()
        assert engine.run(last_logits) == plain  # bit-exact restore
        list(engine.stream(MESSAGES, SamplingParams.greedy(8)))
        assert engine.last_reply_tokens == base
    finally:
        engine.unload()


def test_scoring_reads_the_quantized_model(kept, tiny_model_dir):
    from models.adapter_scores import _general_ppl, _probe_nlls
    from models.train_worker import _load
    model, tokenizer = _load({"model": str(tiny_model_dir)})
    assert set(QUANTIZED) <= _kinds(model)
    scored = _probe_nlls(model, tokenizer, [{"question": "Where do I live?", "answer": "In Berlin."}])
    assert len(scored) == 1 and math.isfinite(scored[0][0]) and scored[0][1] > 0
    assert math.isfinite(_general_ppl(model, tokenizer, ["The sea was calm that night."]))
