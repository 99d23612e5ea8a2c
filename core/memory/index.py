"""Keeps the vector index in step with memory and episode rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import numpy as np

from core.protocols import Embedder
from core.store import vectors
from core.store.db import Database
from core.types import Episode, Memory
from core.store.episodes import get_episodes
from core.store.memories import get_memories


def memory_text(memory: Memory) -> str:
    """What a memory's vector is made from."""
    return memory.statement


def episode_text(episode: Episode) -> str:
    """What an episode's vector is made from: who said it, then the exchange."""
    text = f'{episode.speaker} said, "{episode.user_text}"'
    if episode.assistant_text:
        text += f' and the assistant replied, "{episode.assistant_text}"'
    return text


@dataclass
class Precomputed:
    """An embedder whose vectors were made before the write transaction began: embedding takes seconds (an
    import: minutes) and a transaction held that long makes every other writer fail. Texts it has not seen
    (none, when the caller predicted them right) are embedded on the spot."""
    inner: Embedder
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, embedder: Embedder, texts: Sequence[str]) -> "Precomputed":
        unique = list(dict.fromkeys(texts))
        made = embedder.embed(unique) if unique else []
        return cls(embedder, dict(zip(unique, made)))

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.inner.embed(missing)))
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)


def export_texts(data: Mapping[str, Any]) -> list[str]:
    """The texts an import will index, predicted from the parsed export (so they are embedded beforehand)."""
    texts = [str(row["statement"]) for row in data.get("memories", ())]
    for row in data.get("episodes", ()):
        texts.append(episode_text(SimpleNamespace(speaker=row.get("speaker") or "user", user_text=row["user_text"],
                                                  assistant_text=row.get("assistant_text") or "")))
    return texts


def ensure_bound(db: Database, embedder: Embedder) -> None:
    vectors.bind_embedder(db, embedder.name, embedder.dimension)


def index_memories(db: Database, embedder: Embedder, ids: Sequence[int]) -> None:
    ensure_bound(db, embedder)
    found = get_memories(db, ids)
    order = [i for i in ids if i in found]
    if order:
        vectors.upsert_vectors(db, "memory", order, embedder.embed([memory_text(found[i]) for i in order]))


def index_episodes(db: Database, embedder: Embedder, ids: Sequence[int]) -> None:
    ensure_bound(db, embedder)
    found = get_episodes(db, ids)
    order = [i for i in ids if i in found]
    if order:
        vectors.upsert_vectors(db, "episode", order, embedder.embed([episode_text(found[i]) for i in order]))


def repair_missing_vectors(db: Database, embedder: Embedder) -> int:
    """Give every memory and episode without a vector its vector (recall cannot find a row without one)."""
    repaired = 0
    for table, index in (("memory", index_memories), ("episode", index_episodes)):
        missing = vectors.ids_without_vectors(db, table)
        if missing:
            index(db, embedder, missing)
            repaired += len(missing)
    return repaired
