"""Structured output as real models write it: whitespace they prefer is allowed (bounded), and the fixed prefix of
a structured prompt is read once and reused, with the same output as a run without the cache."""
from __future__ import annotations

import jsonschema

from core.prompts.engram import engram_messages, facts_max_tokens, facts_schema
from core.protocols import ChatMessage
from models.structured import StructuredGenerator

SCHEMA = facts_schema(2)
PRETTY = ('{\n  "facts": [\n    {\n      "subject": "user",\n      "relation": "likes",\n      "object": "tea",\n'
          '      "statement": "The user likes tea.",\n      "confidence": 90,\n      "kind": "semantic",\n'
          '      "critical": false,\n      "source": "user_said",\n      "when": ""\n    }\n  ]\n}')


def _accepts(generator: StructuredGenerator, text: str) -> bool:
    from llguidance import LLMatcher
    tokenizer = generator._tokenizer()
    matcher = LLMatcher(tokenizer, generator.compile(SCHEMA), log_level=0)
    return matcher.consume_tokens(tokenizer.tokenize_str(text)) and matcher.is_accepting()


def test_the_grammar_allows_the_newline_a_model_writes_after_an_open_list(tiny_engine):
    """Qwen2.5-0.5B's likeliest token after '{"facts":[' was a newline; compact-only JSON forbade it."""
    generator = StructuredGenerator(tiny_engine)
    compact = PRETTY.replace("\n", "").replace("  ", "").replace('": ', '":')
    assert _accepts(generator, compact) and _accepts(generator, PRETTY)
    assert _accepts(generator, '{"facts": [\n]}')
    assert not _accepts(generator, '{"facts": [' + "\n" * 40 + "]}")  # bounded: no endless whitespace
    assert not _accepts(generator, PRETTY + "\n")  # nothing after the object


def test_the_fixed_prefix_is_reused_with_the_same_output(tiny_engine):
    cached = StructuredGenerator(tiny_engine)
    fresh = StructuredGenerator(tiny_engine, use_prompt_cache=False)
    system_tokens = len(tiny_engine.render([ChatMessage("system", engram_messages("a", "b", "c")[0].content)]))
    for text in ("I live in Paris.", "My dog is called Rex.", "I live in Paris."):
        messages = engram_messages(text, "Nice.", "2026-11-25")
        value = cached.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2))
        jsonschema.validate(value, SCHEMA)
        assert value == fresh.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2))
    assert cached.last_reused_tokens >= system_tokens - 2  # the whole instruction block came from the cache
    assert fresh.last_reused_tokens == 0


def test_a_cache_filled_under_another_adapter_is_not_reused(tiny_model_dir, tmp_path):
    from models.chat import ChatEngine
    from models.testing import write_random_adapter
    engine = ChatEngine.load(tiny_model_dir, context_tokens=2048)
    try:
        generator = StructuredGenerator(engine)
        messages = engram_messages("I live in Paris.", "Nice.", "2026-11-25")
        generator.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2))
        engine.load_adapter(write_random_adapter(tiny_model_dir, tmp_path / "adapter"))
        with_adapter = generator.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2))
        assert generator.last_reused_tokens == 0
        fresh = StructuredGenerator(engine, use_prompt_cache=False)
        assert with_adapter == fresh.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2))
        generator.clear_cache()
        assert len(generator._caches) == 0
    finally:
        engine.unload()


def test_the_real_model_extracts_schema_valid_json_reusing_the_prefix(real_model_dir):
    """Two extraction calls on SmolLM2: valid objects both times, the instruction block read only once."""
    from models.chat import ChatEngine
    engine = ChatEngine.load(real_model_dir, context_tokens=4096)
    try:
        generator = StructuredGenerator(engine)
        for text in ("I'm allergic to peanuts.", "I work as a nurse."):
            messages = engram_messages(text, "Noted.", "2026-11-25")
            jsonschema.validate(generator.generate_json(messages, SCHEMA, max_tokens=facts_max_tokens(2)), SCHEMA)
        prompt = engine.render(messages)
        assert generator.last_reused_tokens > 0.8 * len(prompt)
    finally:
        engine.unload()
