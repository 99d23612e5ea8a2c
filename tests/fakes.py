"""Scripted fakes of core.protocols.ChatModel and StructuredModel for unit tests of logic.

Replies come from a script; every structured reply is checked against its schema (a small
validator for the subset of JSON Schema the prompts use) so a fake never hides a bad schema.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Mapping, Sequence

from core.errors import GenerationStopped, StructuredOutputError
from core.protocols import ChatMessage, GenerationChunk, SamplingParams

Responder = Callable[[Sequence[ChatMessage], Mapping[str, Any]], dict]


class ScriptedChatModel:
    """Streams scripted replies word by word; a callable script sees the messages."""

    def __init__(self, script: Sequence[str] | Callable[[Sequence[ChatMessage]], str] = ("OK.",), *,
                 finish: str = "stop") -> None:
        self.script = script
        self.finish = finish  # how the last chunk says the reply ended ("repetition": the engine's loop guard)
        self.calls: list[list[ChatMessage]] = []

    def stream(self, messages: Sequence[ChatMessage], sampling: SamplingParams, *,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        self.calls.append(list(messages))
        if callable(self.script):
            reply = self.script(messages)
        else:
            reply = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        words = reply.split(" ")
        for i, word in enumerate(words):
            if cancel is not None and cancel.is_set():
                yield GenerationChunk("", finish_reason="cancelled")
                return
            last = i == len(words) - 1
            yield GenerationChunk(word + ("" if last else " "), generation_tokens=i + 1,
                                  finish_reason=self.finish if last else None)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1


class ScriptedStructuredModel:
    """Answers by schema title: a list of replies (used in turn, the last repeats) or a responder."""

    def __init__(self, replies: Mapping[str, Sequence[dict] | Responder] | None = None) -> None:
        self.replies = dict(replies or {})
        self.calls: list[tuple[str, list[ChatMessage]]] = []

    def generate_json(self, messages: Sequence[ChatMessage], schema: Mapping[str, Any], *,
                      max_tokens: int = 512, stop: Callable[[], bool] | None = None) -> dict[str, Any]:
        title = schema.get("title", "")
        self.calls.append((title, list(messages)))
        if stop is not None and stop():  # as the real generator asks between its tokens
            raise GenerationStopped(f"stopped while answering {title!r}")
        script = self.replies.get(title)
        if script is None:
            raise StructuredOutputError(f"no scripted reply for schema {title!r}")
        if callable(script):
            reply = script(messages, schema)
        else:
            seen = sum(1 for t, _ in self.calls if t == title)
            reply = script[min(seen - 1, len(script) - 1)]
        problems = validate(reply, schema)
        if problems:
            raise AssertionError(f"scripted reply does not fit schema {title!r}: {problems}")
        return reply

    def titles(self) -> list[str]:
        return [t for t, _ in self.calls]


def validate(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Problems of `value` against the JSON Schema subset used by core.prompts."""
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
              "number": (int, float)}
    if kind and not isinstance(value, checks[kind]) or (kind in ("integer", "number") and isinstance(value, bool)):
        return [f"{path}: expected {kind}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in enum")
    if kind == "string" and len(value) > schema.get("maxLength", 10**9):
        problems.append(f"{path}: longer than maxLength")
    if kind in ("integer", "number"):
        if value < schema.get("minimum", float("-inf")) or value > schema.get("maximum", float("inf")):
            problems.append(f"{path}: out of range")
    if kind == "array":
        if len(value) > schema.get("maxItems", 10**9):
            problems.append(f"{path}: too many items")
        for i, item in enumerate(value):
            problems += validate(item, schema.get("items", {}), f"{path}[{i}]")
    if kind == "object":
        props = schema.get("properties", {})
        problems += [f"{path}: missing {k}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            problems += [f"{path}: unexpected {k}" for k in value if k not in props]
        for key, item in value.items():
            if key in props:
                problems += validate(item, props[key], f"{path}.{key}")
    return problems


class HashEmbedder:
    """A deterministic stand-in embedder (a text's hash seeds its unit vector): for tests of the store's
    concurrency and bookkeeping, where loading the real model in every child process would cost seconds."""

    name = "hash-embedder"
    dimension = 32

    def embed(self, texts):
        import hashlib

        import numpy as np
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            rows.append(vector / np.linalg.norm(vector))
        return np.stack(rows) if rows else np.zeros((0, self.dimension), np.float32)
