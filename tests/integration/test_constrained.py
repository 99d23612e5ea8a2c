"""Constrained decoding that skips the forward passes the grammar does not need (models.constrained): the same JSON
as masking every token one pass at a time, in fewer passes; on the tiny model (plumbing) and SmolLM2 (a real one)."""
from __future__ import annotations

import json

import pytest

from core.prompts.engram import engram_messages, facts_max_tokens, facts_schema
from core.protocols import ChatMessage
from models.generation import generate_tokens
from models.structured import StructuredGenerator

SCHEMA = {"type": "object", "properties": {
    "subject": {"type": "string", "maxLength": 12},
    "relation": {"type": "string", "enum": ["lives_in", "works_as", "likes"]},
    "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    "critical": {"type": "boolean"}},
    "required": ["subject", "relation", "confidence", "critical"], "additionalProperties": False}


def _token_by_token(engine, generator, messages, schema, max_tokens):
    """The reference: one forward pass a token, the whole mask applied at every step (the loop this replaced)."""
    import mlx.core as mx
    import numpy as np
    from llguidance import LLMatcher
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
    from mlx_lm.models.cache import make_prompt_cache

    grammar = generator.compile(schema)
    prompt = engine.prompt_tokens(messages, reserve=max_tokens)

    def run(model, tokenizer):
        matcher = LLMatcher(generator._tokenizer(), grammar, log_level=0)
        bitmask = allocate_token_bitmask(1, generator._tokenizer().vocab_size)
        started = [False]

        def mask(tokens, logits):
            if started[0]:
                matcher.consume_token(int(tokens[-1].item()))
            started[0] = True
            fill_next_token_bitmask(matcher, bitmask)
            allowed = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[: logits.shape[-1]]
            return mx.where(mx.array(allowed.astype(np.bool_)), logits, -mx.inf)

        out = []
        for token in generate_tokens(model, mx.array(prompt), cache=make_prompt_cache(model),
                                     stream=engine.generation_stream, max_tokens=max_tokens, logits_processors=[mask]):
            if token in tokenizer.eos_token_ids:
                break
            out.append(token)
        return tokenizer.decode(out)

    return json.loads(engine.run(run))


def test_the_same_object_as_masking_every_token_in_fewer_passes(tiny_engine):
    generator = StructuredGenerator(tiny_engine, use_prompt_cache=False)
    messages = [ChatMessage("user", "I live in Oslo and work as a baker.")]
    value = generator.generate_json(messages, SCHEMA, max_tokens=120)
    counts = generator.last_counts
    assert value == _token_by_token(tiny_engine, generator, messages, SCHEMA, 120)
    assert counts.forced > 0  # the keys, the rest of an enum: read, not sampled
    assert counts.passes == counts.sampled < counts.sampled + counts.forced
    assert counts.masks <= counts.sampled


def test_sampling_still_varies_and_stays_in_the_schema(tiny_engine):
    import jsonschema
    seen = set()
    for seed in range(8):
        generator = StructuredGenerator(tiny_engine, temperature=1.0, seed=seed)
        value = generator.generate_json([ChatMessage("user", "Extract.")], SCHEMA, max_tokens=120)
        jsonschema.validate(value, SCHEMA)
        seen.add(json.dumps(value, sort_keys=True))
    assert len(seen) > 2


@pytest.mark.heavy  # two extractions of SmolLM2, one token by token: 1-3 minutes on this CPU
def test_smollm2_extracts_the_same_facts_with_fewer_passes(real_model_dir):
    """A real model on the real engram prompt: the object is the one masking every token gives. (The tiny model's
    test above runs the same comparison in the default run.)"""
    from models.chat import ChatEngine
    engine = ChatEngine.load(real_model_dir, context_tokens=2048)
    try:
        generator = StructuredGenerator(engine, use_prompt_cache=False)
        messages = engram_messages("I live in Lisbon and I work as a nurse.", "Nice!", "2026-11-28")
        schema, limit = facts_schema(2), facts_max_tokens(2)
        value = generator.generate_json(messages, schema, max_tokens=limit)
        counts = generator.last_counts
        assert value == _token_by_token(engine, generator, messages, schema, limit)
        assert counts.passes < counts.sampled + counts.forced + counts.drafted  # fewer passes than tokens
    finally:
        engine.unload()
