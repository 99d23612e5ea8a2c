"""Keeps the vector index in step with memory and episode rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence

import numpy as np

from core.memory.sentences import sentence_text, turn_sentences
from core.protocols import Embedder
from core.store import sentences, vectors
from core.store.db import Database
from core.types import Memory
from core.store.episodes import get_episodes
from core.store.memories import get_memories


class TurnTexts(Protocol):
    """What a turn's vectors are made from: a stored Episode's texts, or an UnsavedTurn's."""
    @property
    def speaker(self) -> str: ...

    @property
    def user_text(self) -> str: ...

    @property
    def assistant_text(self) -> str: ...


@dataclass(frozen=True)
class UnsavedTurn:
    """A turn not stored yet: an import predicts the texts it will embed before its write transaction."""
    speaker: str
    user_text: str
    assistant_text: str


def memory_text(memory: Memory) -> str:
    """What a memory's vector is made from."""
    return memory.statement


def episode_text(episode: TurnTexts) -> str:
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
        made: Iterable[np.ndarray] = embedder.embed(unique) if unique else []
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
        texts += episode_texts(UnsavedTurn(speaker=row.get("speaker") or "user", user_text=row["user_text"],
                                           assistant_text=row.get("assistant_text") or ""))
    return texts


def episode_texts(episode: TurnTexts) -> list[str]:
    """Every text an episode's vectors are made from: the whole turn, then its sentences (core.memory.sentences)."""
    return [episode_text(episode), *_pieces({0: episode}, _spans({0: episode}))]


def ensure_bound(db: Database, embedder: Embedder) -> None:
    vectors.bind_embedder(db, embedder.name, embedder.dimension)


def index_memories(db: Database, embedder: Embedder, ids: Sequence[int]) -> None:
    ensure_bound(db, embedder)
    found = get_memories(db, ids)
    order = [i for i in ids if i in found]
    if order:
        vectors.upsert_vectors(db, "memory", order, embedder.embed([memory_text(found[i]) for i in order]))


def index_episodes(db: Database, embedder: Embedder, ids: Sequence[int]) -> None:
    """The turns' vectors and their sentences' (core.memory.sentences): embedded first, then written in one
    transaction, so a turn is never left with its vector and without its sentences (or with an old reply's)."""
    ensure_bound(db, embedder)
    found = get_episodes(db, ids)
    order = list(dict.fromkeys(i for i in ids if i in found))
    if not order:
        return
    spans = _spans({i: found[i] for i in order})
    made = embedder.embed([episode_text(found[i]) for i in order] + _pieces(found, spans))
    with db.transaction():
        vectors.upsert_vectors(db, "episode", order, made[:len(order)])
        sentences.write(db, spans, made[len(order):])


def _spans(found: Mapping[int, TurnTexts]) -> dict[int, list[tuple[int, int]]]:
    """Each turn's sentences that get vectors of their own, as offsets into its words."""
    return {i: turn_sentences(episode.user_text, episode.assistant_text) for i, episode in found.items()}


def _pieces(found: Mapping[int, TurnTexts], spans: Mapping[int, Sequence[tuple[int, int]]]) -> list[str]:
    """The texts of the turns' sentences, in the order of `spans`."""
    return [sentence_text(found[i].speaker, found[i].user_text[a:b]) for i in spans for a, b in spans[i]]


def repair_missing_vectors(db: Database, embedder: Embedder) -> int:
    """Give every memory and episode without a vector its vector (recall cannot find a row without one; a sentence
    is written with its vector)."""
    repaired = 0
    tables: list[tuple[vectors.Table, Any]] = [("memory", index_memories), ("episode", index_episodes)]
    for table, index in tables:
        missing = vectors.ids_without_vectors(db, table)
        if missing:
            index(db, embedder, missing)
            repaired += len(missing)
    return repaired


def stored_sentence_texts(db: Database) -> Iterable[tuple[int, str]]:
    """(sentence id, what its vector is made from) of every stored sentence (a re-embed)."""
    return ((sid, sentence_text(who, text)) for sid, who, text in sentences.spoken(db))


def index_turn_vectors(db: Database, embedder: Embedder, ids: Sequence[int]) -> None:
    """The turns' own vectors only, their sentences left to the idle-time backlog (index_sentence_backlog): a bulk
    import of history embeds one text a turn instead of a turn and each of its sentences, 5–10× fewer. Recall finds
    such a turn by its whole vector and its words until its sentences come."""
    ensure_bound(db, embedder)
    found = get_episodes(db, ids)
    order = list(dict.fromkeys(i for i in ids if i in found))
    if not order:
        return
    made = embedder.embed([episode_text(found[i]) for i in order])
    with db.transaction():
        vectors.upsert_vectors(db, "episode", order, made)
        below = sentences.backfill_below(db)
        sentences.set_backfill_below(db, max(below or 0, max(order) + 1))


def index_sentence_backlog(db: Database, embedder: Embedder, most: int = 512, batch: int = 128) -> int:
    """Give up to `most` of the turns without sentence vectors below the backlog's mark — written before schema 9,
    or imported in bulk (index_turn_vectors) — theirs, newest first, `batch` turns to a transaction: idle-time work,
    a step of the daily forgetting job at a time. A turn that has its sentences already is passed over. Returns
    the turns done (0: none is left); a kill loses at most the batch in hand."""
    done = 0
    while done < most and (below := sentences.backfill_below(db)) is not None:
        ensure_bound(db, embedder)
        ids = [int(r[0]) for r in db.execute(
            "SELECT id FROM episodes AS e WHERE id < ? AND NOT EXISTS "
            "(SELECT 1 FROM episode_sentences AS s WHERE s.episode_id = e.id) ORDER BY id DESC LIMIT ?",
            (below, min(int(batch), most - done)))]
        found = get_episodes(db, ids)  # embedded before the write lock is taken
        spans = _spans(found)
        pieces = _pieces(found, spans)
        made = embedder.embed(pieces) if pieces else np.zeros((0, embedder.dimension), np.float32)
        with db.transaction():
            sentences.write(db, spans, made)
            sentences.set_backfill_below(db, min(ids) if ids else None)
        done += len(ids)
    return done
