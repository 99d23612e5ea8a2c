"""What core needs from the runtimes in models/: each protocol has one or two required methods.

core never imports models/; app/services/wiring.py builds the real implementations and passes them in,
and tests pass fakes.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system / user / assistant
    content: str


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_p: float = 0.9
    max_tokens: int = 1024
    seed: int | None = None

    @classmethod
    def greedy(cls, max_tokens: int = 256) -> "SamplingParams":
        return cls(temperature=0.0, top_p=1.0, max_tokens=max_tokens)


@dataclass(frozen=True)
class GenerationChunk:
    """One step of a streamed reply. The last chunk carries a finish_reason."""
    text: str
    prompt_tokens: int = 0
    generation_tokens: int = 0
    tokens_per_second: float = 0.0
    # "stop", "length", "cancelled", "repetition", "echo" (core.prompt_echo) or None while streaming
    finish_reason: str | None = None


@runtime_checkable
class Embedder(Protocol):
    """Sentence embeddings, L2-normalised float32 rows."""
    @property
    def name(self) -> str: ...  # read-only here: a wrapper (core.memory.index.Precomputed) passes its inner one's

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class ChatModel(Protocol):
    def stream(self, messages: Sequence[ChatMessage], sampling: SamplingParams, *,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class StructuredModel(Protocol):
    def generate_json(self, messages: Sequence[ChatMessage], schema: Mapping[str, Any], *,
                      max_tokens: int = 512, stop: Callable[[], bool] | None = None) -> dict[str, Any]:
        """A JSON object valid against `schema`; raises core.errors.StructuredOutputError otherwise. `stop()` is
        asked between tokens: a yes ends the generation with core.errors.GenerationStopped."""
        ...


@runtime_checkable
class Trainer(Protocol):
    def train(self, examples: Sequence[Mapping[str, Any]], output_dir: str, *,
              progress: Any = None, cancel: threading.Event | None = None) -> Mapping[str, Any]: ...
