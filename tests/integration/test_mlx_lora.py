"""LoRA adapters on the loaded tiny 4-bit base: load, switch, remove (exact restore), fuse."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import ModelError
from core.protocols import ChatMessage, SamplingParams
from models.chat import ChatEngine
from models.lora import fuse_adapter
from models.testing import write_random_adapter

MESSAGES = [ChatMessage("user", "what do I like to drink?")]


@pytest.fixture(scope="module")
def adapters(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    return (write_random_adapter(tiny_model_dir, root / "a", seed=1),
            write_random_adapter(tiny_model_dir, root / "b", seed=2))


@pytest.fixture
def engine(tiny_model_dir, tiny_engine):
    engine = ChatEngine.load(tiny_model_dir, worker=tiny_engine.worker)
    yield engine
    engine.unload()


def reply(engine):
    list(engine.stream(MESSAGES, SamplingParams.greedy(16)))
    return list(engine.last_reply_tokens)


def logits(engine):
    import mlx.core as mx
    prompt = engine.render(MESSAGES)
    return engine.run(lambda model, tokenizer: mx.array(model(mx.array(prompt)[None])[0, -1]).tolist())


def test_adapter_round_trip_restores_base_exactly(engine, adapters):
    base_reply, base_logits = reply(engine), logits(engine)
    engine.load_adapter(adapters[0])
    assert engine.adapter == adapters[0]
    with_a = reply(engine)
    assert logits(engine) != base_logits
    engine.load_adapter(adapters[1])  # switch
    with_b = reply(engine)
    assert with_a != base_reply or with_b != base_reply
    engine.remove_adapter()
    assert engine.adapter is None
    assert reply(engine) == base_reply
    assert logits(engine) == base_logits  # bit-exact
    engine.load_adapter(adapters[0])
    assert reply(engine) == with_a  # switching back gives the same adapter output


def test_bad_adapter_leaves_base_untouched(engine, tmp_path):
    base = reply(engine)
    with pytest.raises(ModelError, match="not an adapter folder"):
        engine.load_adapter(tmp_path)
    assert engine.adapter is None and reply(engine) == base


def test_fuse_writes_a_standalone_model(tiny_model_dir, adapters, tmp_path, tiny_engine):
    fused_dir = fuse_adapter(tiny_model_dir, adapters[0], tmp_path / "fused")
    fused = ChatEngine.load(fused_dir, worker=tiny_engine.worker)
    base = ChatEngine.load(tiny_model_dir, worker=tiny_engine.worker)
    try:
        chunks = list(fused.stream(MESSAGES, SamplingParams.greedy(4)))
        assert chunks[-1].generation_tokens == 4
        plain = np.array(logits(base))
        base.load_adapter(adapters[0])
        with_adapter, merged = np.array(logits(base)), np.array(logits(fused))
        # the fused weights are re-quantized, so not bit-exact: but they behave as base + adapter, not as base
        # (measured here: mean |difference| 1.7 from base + adapter, 4.6 from the base)
        assert np.abs(merged - with_adapter).mean() < 0.5 * np.abs(merged - plain).mean()
    finally:
        fused.unload()
        base.unload()
    with pytest.raises(ModelError, match="already exists"):
        fuse_adapter(tiny_model_dir, adapters[0], fused_dir)


def test_scoring_probes_in_one_padded_batch_gives_the_figures_of_reading_each_alone(tiny_model_dir, adapters):
    """The gate reads its probes several to a forward pass, padded on the right; each probe's answer loss must equal
    reading the probe alone, on the base and under an adapter (more probes than one batch holds)."""
    from mlx_lm import load
    from mlx_lm.tuner.utils import load_adapters, remove_lora_layers
    from models.adapter_scores import _probe_nlls, _token_nll
    model, tokenizer = load(str(tiny_model_dir))
    probes = [{"question": "What is the capital of France?", "answer": "Paris."},
              {"question": "How many legs does a spider have?", "answer": "A spider has eight legs."},
              {"question": "Remind me, what do I prefer?", "answer": "Short answers."}] * 4  # 12 > BATCH

    def whole(probe):
        turn = [{"role": "user", "content": probe["question"]}]
        prompt = tokenizer.apply_chat_template(turn, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(turn + [{"role": "assistant", "content": probe["answer"]}])
        return _token_nll(model, list(full), len(prompt))

    for adapter in (None, adapters[0]):
        if adapter:
            load_adapters(model, str(adapter))
        cached = _probe_nlls(model, tokenizer, probes)
        plain = [whole(p) for p in probes]
        assert [n for _, n in cached] == [n for _, n in plain]
        assert np.allclose([s for s, _ in cached], [s for s, _ in plain], rtol=1e-3)
        if adapter:
            remove_lora_layers(model)
    assert _probe_nlls(model, tokenizer, []) == []
