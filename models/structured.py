"""JSON-Schema-constrained generation: llguidance allows only what the schema allows (models.constrained: a forward
pass only where the model has a choice, the grammar's forced tokens read with it), so every object handed on parses
and matches the schema. Implements core.protocols.StructuredModel.

Every string without a bound gets one (a small model otherwise rambles until the token limit), and running out
of tokens raises StructuredOutputError instead of passing on a fragment. Whitespace between JSON tokens is
allowed, a bounded run of it: models write JSON pretty-printed, and a grammar that forbids the newline a model
wants after `{"facts":[` steers it into closing the list (Qwen2.5-0.5B returned no fact at all that way). The
fixed prefix of every prompt is read once and kept (models.prompt_cache).
"""
from __future__ import annotations

import contextlib
import copy
import json
from typing import Any, Callable, Mapping, Sequence

from core.errors import GenerationStopped, ModelError, StructuredOutputError
from core.protocols import ChatMessage
from models.chat import ChatEngine
from models.constrained import DecodeCounts, Grammar, constrained_tokens
from models.generation import embedding_rows
from models.prompt_cache import PrefixCaches

DEFAULT_MAX_STRING = 256
# At each place JSON allows whitespace: one space, or a newline and indentation, as pretty-printers write it.
WHITESPACE = r"\n[ ]{0,12}|[ ]"
# Whitespace costs tokens the caller's max_tokens did not count (it budgets compact JSON): this many more.
REPLY_SHARE = 4  # of the window at least, kept for a reply whose worst case is larger than the window
WHITESPACE_TOKENS = 64
_BOUNDED_STRING_KEYS = ("maxLength", "enum", "const", "pattern", "format")


def bound_strings(schema: Mapping[str, Any], max_length: int = DEFAULT_MAX_STRING) -> dict[str, Any]:
    """A copy of `schema` in which every unbounded string has maxLength."""
    bounded = copy.deepcopy(dict(schema))
    _bound_in_place(bounded, max_length)
    return bounded


def _bound_in_place(node: Any, max_length: int) -> None:
    if isinstance(node, list):
        for item in node:
            _bound_in_place(item, max_length)
        return
    if not isinstance(node, dict):
        return
    types = node.get("type")
    is_string = types == "string" or (isinstance(types, list) and "string" in types)
    if is_string and not any(key in node for key in _BOUNDED_STRING_KEYS):
        node["maxLength"] = max_length
    for value in node.values():
        _bound_in_place(value, max_length)


class StructuredGenerator:
    """generate_json over a loaded ChatEngine, sharing its MLX thread; its own prompt caches, not the chat's."""

    def __init__(self, engine: ChatEngine, *, temperature: float = 0.0, seed: int | None = None,
                 max_string_length: int = DEFAULT_MAX_STRING, use_prompt_cache: bool = True) -> None:
        self.engine = engine
        self.temperature = temperature
        self.seed = seed
        self.max_string_length = max_string_length
        self.use_prompt_cache = use_prompt_cache
        self.last_reused_tokens = 0  # prompt tokens of the last call served from a prompt cache
        self.last_counts = DecodeCounts()  # of the last call: tokens sampled, forced, masks computed
        self._caches = PrefixCaches()
        self._lltokenizer: Any = None

    def generate_json(self, messages: Sequence[ChatMessage], schema: Mapping[str, Any], *,
                      max_tokens: int = 512, stop: Callable[[], bool] | None = None) -> dict[str, Any]:
        grammar = self.compile(schema)
        window = self.engine.context_window
        # max_tokens is often a worst case (every string at its bound, a token a character) larger than a small
        # window: reserve at most a quarter of the window, then give the reply all the room the prompt leaves
        prompt = self.engine.prompt_tokens(messages, reserve=min(max_tokens, window // REPLY_SHARE))
        max_tokens = min(max_tokens, window - len(prompt))
        room = window - len(prompt) - max_tokens
        limit = max_tokens + max(0, min(WHITESPACE_TOKENS, room))
        weights = self.engine.adapter  # a cache filled under another adapter is not reused
        tokens = self.engine.run(lambda model, tokenizer: self._generate(model, tokenizer, grammar, prompt,
                                                                          limit, weights, stop))
        return self._finish(grammar, tokens, limit, max_tokens)

    def clear_cache(self) -> None:
        """Free the kept prompt caches (they hold memory in proportion to the prompts' length)."""
        self.engine.run(lambda model, tokenizer: self._caches.clear())

    def compile(self, schema: Mapping[str, Any]) -> str:
        """The llguidance grammar for `schema` (strings bounded, whitespace bounded)."""
        from llguidance import LLMatcher
        if not isinstance(schema, Mapping):
            raise StructuredOutputError("The output schema must be a JSON Schema object.")
        try:
            grammar = LLMatcher.grammar_from_json_schema(
                bound_strings(schema, self.max_string_length), overrides={"whitespace_pattern": WHITESPACE})
        except ValueError as exc:
            raise StructuredOutputError(f"The output schema is not valid JSON Schema: {exc}") from exc
        error = LLMatcher.validate_grammar(grammar, self._tokenizer())
        if error and not error.startswith("WARNING"):
            raise StructuredOutputError(f"The output schema cannot be enforced: {error}")
        return grammar

    def _tokenizer(self) -> Any:
        # Building the llguidance tokenizer takes up to a second for a large vocabulary: do it once.
        if self._lltokenizer is None:
            self._lltokenizer = self.engine.run(lambda model, tokenizer: llguidance_tokenizer(model, tokenizer))
        return self._lltokenizer

    def _generate(self, model: Any, tokenizer: Any, grammar_text: str, prompt: list[int], max_tokens: int,
                  weights: Any, stop: Callable[[], bool] | None = None) -> list[int]:
        import mlx.core as mx
        from llguidance import LLMatcher
        from mlx_lm.sample_utils import make_sampler

        if self.seed is not None:
            mx.random.seed(self.seed)
        grammar = Grammar(LLMatcher(self._tokenizer(), grammar_text, log_level=0), self._tokenizer().vocab_size)
        if self.use_prompt_cache:
            cache, suffix = self._caches.take(model, prompt, weights)
        else:
            cache, suffix = _new_cache(model), prompt
        self.last_reused_tokens = len(prompt) - len(suffix)
        self.last_counts = DecodeCounts()
        sampler = make_sampler(temp=self.temperature) if self.temperature > 0 else None
        produced = constrained_tokens(model, mx.array(suffix), grammar, cache=cache,
                                      stream=self.engine.generation_stream, max_tokens=max_tokens,
                                      eos=set(tokenizer.eos_token_ids), sampler=sampler, counts=self.last_counts,
                                      history=prompt)
        worker = getattr(self.engine, "worker", None)
        with contextlib.closing(produced):  # a stop leaves no generator holding the wired memory limit
            tokens = []
            for token in produced:
                if stop is not None and stop():  # the cache holds a half-made answer: dropped, not kept
                    raise GenerationStopped("The model gave way to something more urgent before it finished.")
                tokens.append(token)
                if worker is not None:
                    worker.run_short_jobs()  # a lane's embedding waits one token, not the whole object
        if self.use_prompt_cache:  # only a generation that ran to its end leaves its cache for the next call
            self._caches.give_back(cache, prompt + tokens, weights)
        return [t for t in tokens if t not in tokenizer.eos_token_ids]

    def _finish(self, grammar: str, tokens: list[int], limit: int, max_tokens: int) -> dict[str, Any]:
        """Re-check the tokens against a fresh matcher, then parse: nothing incomplete is ever returned."""
        from llguidance import LLMatcher
        matcher = LLMatcher(self._tokenizer(), grammar, log_level=0)
        if not matcher.consume_tokens(tokens) or not matcher.is_accepting():
            if len(tokens) >= limit - 1:
                raise StructuredOutputError(f"The model ran out of tokens ({max_tokens}) before it finished the "
                                            f"JSON object; raise max_tokens or tighten the schema.")
            raise StructuredOutputError(f"The model's output does not match the schema: {matcher.get_error()}")
        text = self.engine.tokenizer.decode(tokens)
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise StructuredOutputError(f"The model's output is not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise StructuredOutputError("The schema must describe a JSON object.")
        return value


def _new_cache(model: Any) -> list:
    from mlx_lm.models.cache import make_prompt_cache
    return make_prompt_cache(model)


def llguidance_tokenizer(model: Any, tokenizer: Any) -> Any:
    """An llguidance tokenizer over the model's Hugging Face tokenizer, sized to the model's logits."""
    from llguidance import LLTokenizer
    backend = copy.copy(tokenizer.backend_tokenizer)  # models.chat_tokenizer's, or through mlx-lm's wrapper
    backend.no_padding()
    backend.no_truncation()
    vocab_size = _logits_width(model, tokenizer)
    try:
        return LLTokenizer(backend.to_str(), n_vocab=vocab_size, eos_token=sorted(tokenizer.eos_token_ids))
    except ValueError as exc:  # "vocab size too small": the tokenizer has tokens the weights have no row for
        raise ModelError(f"This model's tokenizer does not fit its weights ({exc}): the model's files do not belong "
                         "together. Choose another model.") from exc


def _logits_width(model: Any, tokenizer: Any) -> int:
    return embedding_rows(model) or len(tokenizer.vocab)
