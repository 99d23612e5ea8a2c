"""A turn's sentences with a vector each (core.memory.sentences says why): rows of offsets into the turn's
user_text (never the text again) and the float vector, gone with their turn by cascade. Recall reads them only to
rescore the turns it has already found (turn_distances): no search of its own, so no index beyond the turn id."""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from core.store import vectors
from core.store.db import Database

BACKFILL_KEY = "sentences_backfill_below"  # the turns below this id were written before sentences had vectors
_BATCH = 500  # ids a statement names at most


def _chunks(ids: Iterable[int]) -> Iterator[tuple[list[int], str]]:
    """The distinct ids in order, _BATCH at a time, each chunk with its "?,?,…" placeholders."""
    keys = sorted({int(i) for i in ids})
    for start in range(0, len(keys), _BATCH):
        chunk = keys[start:start + _BATCH]
        yield chunk, ",".join("?" * len(chunk))


def write(db: Database, spans: Mapping[int, Sequence[tuple[int, int]]], matrix: np.ndarray) -> None:
    """Replace these turns' sentences with `spans` (turn id → its sentences' offsets, in order; an empty list
    leaves the turn none) and their vectors, the rows of `matrix` in the same order. One transaction."""
    rows = [(int(e), int(start), int(end)) for e, pieces in spans.items() for start, end in pieces]
    matrix = vectors.checked_matrix(db, matrix, len(rows)) if rows else matrix
    with db.transaction():
        delete(db, list(spans))
        db.conn.executemany("INSERT INTO episode_sentences(episode_id, span_start, span_end, embedding) "
                            "VALUES (?, ?, ?, ?)", [(*row, v.tobytes()) for row, v in zip(rows, matrix)])


def delete(db: Database, episode_ids: Sequence[int]) -> None:
    """These turns' sentences, vectors and all (a turn indexed again; a purge's cascade does the same)."""
    for chunk, marks in _chunks(episode_ids):
        db.execute(f"DELETE FROM episode_sentences WHERE episode_id IN ({marks})", chunk)


def turn_distances(db: Database, query: np.ndarray, episode_ids: Sequence[int]) -> dict[int, float]:
    """turn id → cosine distance from the query to the nearer of the turn's own vector and its nearest sentence's,
    for the turns that have a vector. One statement reads both (two, one a GROUP BY, cost ~1.8x as much)."""
    bound = vectors.binding(db)
    if bound is None or not episode_ids:
        return {}
    vector, source = bound.checked(query, 1)[0].tobytes(), bound.floats("episode")
    found: dict[int, float] = {}
    for chunk, marks in _chunks(episode_ids):
        for turn, own, sentence in db.execute(
                f"SELECT f.id, vec_distance_cosine(f.embedding, ?1), (SELECT min(vec_distance_cosine(s.embedding, ?1)) "
                f"FROM episode_sentences s WHERE s.episode_id = f.id) FROM {source} f WHERE f.id IN ({marks})",
                [vector, *chunk]):
            found[int(turn)] = float(own) if sentence is None else min(float(own), float(sentence))
    return found


def spoken(db: Database) -> Iterator[tuple[int, str, str]]:
    """(sentence id, who said it, the sentence) of every stored sentence, in id order."""
    for sid, start, end, speaker, user_text in db.execute(
            "SELECT s.id, s.span_start, s.span_end, e.speaker, e.user_text FROM episode_sentences s "
            "JOIN episodes e ON e.id = s.episode_id ORDER BY s.id"):
        yield int(sid), speaker, user_text[start:end]


def replace_vectors(db: Database, made: Iterable[tuple[int, np.ndarray]]) -> None:
    """New vectors for stored sentences, by sentence id (a re-embed with another model)."""
    db.conn.executemany("UPDATE episode_sentences SET embedding = ? WHERE id = ?",
                        [(np.ascontiguousarray(v, dtype=np.float32).tobytes(), int(i)) for i, v in made])


def backfill_below(db: Database) -> int | None:
    """The id below which turns may still lack their sentences (written by an Engram before schema 9)."""
    value = db.scalar("SELECT value FROM meta WHERE key = ?", (BACKFILL_KEY,))
    return None if value is None else int(value)


def set_backfill_below(db: Database, below: int | None) -> None:
    if below is None or below <= 0:
        db.execute("DELETE FROM meta WHERE key = ?", (BACKFILL_KEY,))
    else:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (BACKFILL_KEY, str(int(below))))


def nearest_spans(db: Database, query: np.ndarray, episode_ids: Sequence[int]) -> dict[int, tuple[int, int, float]]:
    """turn id → (start, end, cosine distance) of its sentence nearest the query, for the turns that have sentences:
    which of a recalled turn's sentences matched (a few turns, after recall has ranked them)."""
    bound = vectors.binding(db)
    if bound is None or not episode_ids:
        return {}
    vector = bound.checked(query, 1)[0].tobytes()
    nearest: dict[int, tuple[int, int, float]] = {}
    for chunk, marks in _chunks(episode_ids):
        for turn, begin, end, distance in db.execute(
                "SELECT episode_id, span_start, span_end, vec_distance_cosine(embedding, ?) FROM episode_sentences "
                f"WHERE episode_id IN ({marks}) ORDER BY episode_id, id", [vector, *chunk]):
            if int(turn) not in nearest or float(distance) < nearest[int(turn)][2]:
                nearest[int(turn)] = (int(begin), int(end), float(distance))
    return nearest
