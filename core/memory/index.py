"""Keeps the vector index in step with memory and episode rows."""
from __future__ import annotations

from typing import Sequence

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
