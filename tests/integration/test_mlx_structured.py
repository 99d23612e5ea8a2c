"""Schema-constrained generation on the real tiny model: every object parses and validates."""
from __future__ import annotations

import jsonschema
import pytest

from core.errors import GenerationStopped, StructuredOutputError
from core.protocols import ChatMessage, StructuredModel
from models.structured import StructuredGenerator, bound_strings

FACT_SCHEMA = {
    "type": "object",
    "properties": {
        "subject": {"type": "string", "maxLength": 12},
        "predicate": {"type": "string", "enum": ["likes", "lives_in", "works_as", "has"]},
        "object": {"type": "string", "maxLength": 12},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
        "critical": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2},
        "note": {"type": ["string", "null"], "maxLength": 10},
    },
    "required": ["subject", "predicate", "object", "confidence", "critical", "tags"],
    "additionalProperties": False,
}


def test_fifty_generations_are_all_valid(tiny_engine):
    seen = set()
    for i in range(50):
        generator = StructuredGenerator(tiny_engine, temperature=1.0, seed=i)
        assert isinstance(generator, StructuredModel)
        value = generator.generate_json([ChatMessage("user", f"Extract the fact from message {i}.")],
                                        FACT_SCHEMA, max_tokens=160)
        jsonschema.validate(value, FACT_SCHEMA)
        seen.add(repr(value))
    assert len(seen) > 25  # sampling really varied; the grammar did not force one answer


def test_greedy_is_deterministic(tiny_engine):
    generator = StructuredGenerator(tiny_engine)
    messages = [ChatMessage("user", "Extract.")]
    assert generator.generate_json(messages, FACT_SCHEMA) == generator.generate_json(messages, FACT_SCHEMA)


def test_running_out_of_tokens_is_a_clear_error(tiny_engine):
    schema = {"type": "object", "properties": {"story": {"type": "string", "minLength": 200, "maxLength": 300}},
              "required": ["story"]}
    with pytest.raises(StructuredOutputError, match="ran out of tokens"):
        StructuredGenerator(tiny_engine).generate_json([ChatMessage("user", "story")], schema, max_tokens=8)


def test_a_stop_ends_the_generation_between_tokens_and_the_next_call_is_whole(tiny_engine):
    """Learning gives way to a reply: `stop()` is asked between tokens, and the half-made answer's cache is not
    kept for the next call."""
    generator = StructuredGenerator(tiny_engine)
    messages = [ChatMessage("user", "Extract the fact.")]
    whole = generator.generate_json(messages, FACT_SCHEMA, max_tokens=160)
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3  # three tokens, then a reply wants the model

    with pytest.raises(GenerationStopped):
        generator.generate_json(messages, FACT_SCHEMA, max_tokens=160, stop=stop)
    assert len(asked) == 4
    assert generator.generate_json(messages, FACT_SCHEMA, max_tokens=160, stop=lambda: False) == whole


def test_invalid_schema_is_a_clear_error(tiny_engine):
    with pytest.raises(StructuredOutputError):
        StructuredGenerator(tiny_engine).generate_json([ChatMessage("user", "x")], {"type": "wibble"})


def test_chat_cache_is_untouched_by_structured_calls(tiny_engine):
    from core.protocols import SamplingParams
    messages = [ChatMessage("user", "hello there")]
    list(tiny_engine.stream(messages, SamplingParams.greedy(8)))
    first = list(tiny_engine.last_reply_tokens)
    StructuredGenerator(tiny_engine).generate_json(messages, FACT_SCHEMA)
    list(tiny_engine.stream(messages, SamplingParams.greedy(8)))
    assert tiny_engine.last_reply_tokens == first


def test_bound_strings_adds_limits_only_where_missing():
    schema = {"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "maxLength": 5},
        "c": {"type": "string", "enum": ["x"]},
        "d": {"type": "array", "items": {"type": ["string", "null"]}},
    }}
    bounded = bound_strings(schema, 64)
    props = bounded["properties"]
    assert props["a"]["maxLength"] == 64 and props["b"]["maxLength"] == 5
    assert "maxLength" not in props["c"] and props["d"]["items"]["maxLength"] == 64
    assert "maxLength" not in schema["properties"]["a"]  # the caller's schema is not modified


def test_a_reply_budget_larger_than_the_window_is_fitted_to_it(tiny_engine):
    """The facts' worst case (one token a character, core.prompts.engram.facts_max_tokens(6) = 3,184) is larger
    than a 2,048-token window: the reply gets the room the prompt leaves, not an error before it starts."""
    from core.prompts.engram import facts_max_tokens
    assert facts_max_tokens(6) > tiny_engine.context_window
    value = StructuredGenerator(tiny_engine).generate_json([ChatMessage("user", "I live in Oslo.")], FACT_SCHEMA,
                                                           max_tokens=facts_max_tokens(6))
    jsonschema.validate(value, FACT_SCHEMA)


def test_a_prompt_that_leaves_no_room_for_the_reply_is_still_refused(tiny_engine):
    from core.errors import ModelError
    long = "word " * 3000
    with pytest.raises(ModelError, match="context window"):
        StructuredGenerator(tiny_engine).generate_json([ChatMessage("user", long)], FACT_SCHEMA, max_tokens=3184)
