"""Consolidation (seed 001, Exocortex's clustered recollections): episodes → summaries, memories → a graph.

One pass has three phases, each done in small batches so the idle-time job can stop between them:

1. episodes: recent episodes (within consolidation_window_days, at least an hour old, not yet summarised)
   are clustered by embedding — a batch at a time, each episode joins the first cluster whose centroid is
   within cluster_similarity (cosine), else starts one. A cluster of at least min_cluster_size becomes a
   summary memory (kind 'summary') linked to its episodes (memory_sources and episodes.summary_id). The
   summary is the model's one or two sentences (core.prompts.consolidate, structured output) followed by
   the statements of the facts drawn from those episodes, so no fact depends on the model's wording. A
   sentence of the model's is kept only if it is language and its content words are in what the user said
   in those episodes (Settings.grounding.min_summary_support); each one dropped is counted in the report with
   its reason. Without a model (or when it fails, or nothing of it is kept) the summary is
   core.memory.compaction.summary_text.
2. similarity: each memory added since the previous pass (within the window, at most MAX_NEW_MEMORIES per
   pass; a bulk import is linked over several nights) gets 'similarity' edges to its
   similarity_neighbours nearest active memories whose cosine is at least similarity_edge_threshold.
3. importance: core.memory.importance.update_importance (Hebbian decay, PageRank, permanence).

For B1's bench/turn.py: `consolidation_pass(db, settings, embedder, model=None)` runs a whole pass and
returns a ConsolidationReport. The scheduler's job uses `Consolidator(...).step` with core.jobs.stepwise.
"""
from __future__ import annotations

import re
import time as _time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from core.config import Settings
from core.errors import EngramError, GenerationStopped
from core.jobs import Step
from core.memory import compaction
from core.memory.grounding import lexical_support
from core.memory.importance import update_importance
from core.memory.index import index_memories
from core.memory.language import language_problem
from core.prompts import consolidate as prompt
from core.prompts.reflect import worst_case_chars
from core.protocols import Embedder, StructuredModel
from core.store import edges, vectors
from core.store.db import Database
from core.words import counted

SECONDS_PER_DAY = 86400.0
MIN_EPISODE_AGE = 3600.0  # a conversation still going on is not summarised yet
MEMORY_CURSOR_KEY = "consolidation_memory_cursor"
MAX_NEW_MEMORIES = 5000  # similarity work per pass is bounded (new x all vectors)
PHASES = ("episodes", "similarity", "importance")
VECTOR_CHUNK = 5000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")  # "3.5 km" and "St. Mary's" stay whole


@dataclass(frozen=True)
class ConsolidationReport:
    summaries: int
    episodes_linked: int
    similarity_edges: int
    made_permanent: int
    seconds: float
    dropped: dict[str, int] = field(default_factory=dict)  # model summary sentences left out, by reason


def cluster(vectors_in_order: np.ndarray, min_similarity: float) -> list[list[int]]:
    """Leader clustering: row indices grouped so each row is within min_similarity of its cluster's centroid."""
    centroids: list[np.ndarray] = []
    members: list[list[int]] = []
    for n, vector in enumerate(vectors_in_order):
        unit = vector / max(float(np.linalg.norm(vector)), 1e-12)
        if centroids:
            scores = np.stack(centroids) @ unit
            best = int(np.argmax(scores))
            if scores[best] >= min_similarity:
                members[best].append(n)
                total = centroids[best] * (len(members[best]) - 1) + unit
                centroids[best] = total / max(float(np.linalg.norm(total)), 1e-12)
                continue
        centroids.append(unit)
        members.append([n])
    return members


class Consolidator:
    """One consolidation pass over a store, resumable from its state between batches."""

    def __init__(self, db: Database, settings: Settings, embedder: Embedder,
                 model: StructuredModel | None = None, stop: Callable[[], bool] | None = None) -> None:
        """`stop()` is asked while the model writes a summary: a yes raises GenerationStopped, and the batch's
        transaction writes nothing (core.jobs.stepwise yields and does the batch again)."""
        self.db, self.settings, self.embedder, self.model, self.stop = db, settings, embedder, model, stop
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None  # (ids, unit vectors) of active memories

    def step(self, payload: Mapping[str, Any], state: Mapping[str, Any]) -> Step:
        state = {"phase": PHASES[0], "cursor": 0, "summaries": 0, "linked": 0, "edges": 0, "permanent": 0,
                 "dropped": {}, **state}
        phase = state["phase"]
        if phase == "episodes":
            return self._episode_batch(state)
        if phase == "similarity":
            return self._similarity_batch(state)
        report = update_importance(self.db, self.settings)
        state.update(permanent=state["permanent"] + len(report.made_permanent), phase="done")
        return Step(state, 1.0, f"{counted(state['summaries'], 'summary')}, "
                                f"{counted(state['edges'], 'similarity edge')}, "
                                f"{len(report.made_permanent)} made permanent", done=True)

    def run(self) -> ConsolidationReport:
        started = _time.perf_counter()
        state: Mapping[str, Any] = {}
        while True:
            result = self.step({}, state)
            state = result.state
            if result.done:
                break
        return ConsolidationReport(state["summaries"], state["linked"], state["edges"], state["permanent"],
                                   _time.perf_counter() - started, dict(state["dropped"]))

    # -- phase 1 -----------------------------------------------------------------------------------------
    def _episode_batch(self, state: dict) -> Step:
        now = self.db.now()
        window = now - self.settings.reflection.consolidation_window_days * SECONDS_PER_DAY
        rows = self.db.query(
            "SELECT id, user_text, assistant_text, created_at FROM episodes WHERE id > ? AND created_at >= ? "
            "AND created_at <= ? AND summary_id IS NULL AND forgotten_at IS NULL AND deleted_at IS NULL "
            "ORDER BY id LIMIT ?", (state["cursor"], window, now - MIN_EPISODE_AGE,
                                    int(self.settings.reflection.batch_size)))
        if not rows:
            return Step({**state, "phase": "similarity", "cursor": 0}, 0.5, "episodes clustered")
        found = vectors.get_vectors(self.db, "episode", [r["id"] for r in rows])
        cursor = int(rows[-1]["id"])
        rows = [r for r in rows if r["id"] in found]  # an episode without a vector waits for its index
        last_id = int(self.db.scalar("SELECT max(id) FROM episodes") or 1)
        made = []
        dropped = dict(state["dropped"])
        if rows:
            groups = cluster(np.stack([found[r["id"]] for r in rows]),
                             self.settings.reflection.cluster_similarity)
            with self.db.transaction():
                made = [self._summarise([rows[n] for n in group], dropped) for group in groups
                        if len(group) >= self.settings.reflection.min_cluster_size]
            if made:
                index_memories(self.db, self.embedder, [m for m, _ in made])
        state = {**state, "cursor": cursor, "summaries": state["summaries"] + len(made), "dropped": dropped,
                 "linked": state["linked"] + sum(n for _, n in made)}
        return Step(state, 0.5 * min(1.0, cursor / last_id), f"clustered episodes up to {cursor}")

    def _summarise(self, episodes: Sequence[dict], dropped: dict[str, int]) -> tuple[int, int]:
        ids = [int(e["id"]) for e in episodes]
        model_text = grounded_summary(self._model_summary(episodes), [e["user_text"] for e in episodes],
                                      self.settings.grounding.min_summary_support, dropped)
        text = compaction.with_facts(model_text, compaction.facts_of(self.db, ids)) if model_text else None
        reason = f"consolidation of {counted(len(ids), 'related conversation turn')}"
        summary_id = compaction.write_summary(self.db, episodes, self.db.now(), text=text, reason=reason)
        marks = ",".join("?" * len(ids))
        self.db.execute(f"UPDATE episodes SET summary_id = ? WHERE id IN ({marks})", [summary_id, *ids])
        return summary_id, len(ids)

    def _model_summary(self, episodes: Sequence[dict]) -> str:
        if self.model is None:
            return ""
        lines = [f"user: {e['user_text']}" + (f" / assistant: {e['assistant_text']}" if e["assistant_text"] else "")
                 for e in episodes]
        try:
            schema = prompt.summary_schema()
            reply = self.model.generate_json(prompt.summary_messages(lines), schema,
                                             max_tokens=worst_case_chars(schema), stop=self.stop)
        except GenerationStopped:
            raise  # the user came back: not a failed summary, but one to write later
        except EngramError:
            return ""  # the deterministic summary keeps every fact anyway
        return str(reply.get("summary", "")).strip()

    # -- phase 2 -----------------------------------------------------------------------------------------
    def _similarity_batch(self, state: dict) -> Step:
        start = int(self.db.scalar("SELECT value FROM meta WHERE key = ?", (MEMORY_CURSOR_KEY,)) or 0)
        if state.get("processed", 0) >= MAX_NEW_MEMORIES:
            return Step({**state, "phase": "importance"}, 0.9, "similarity edges: per-pass limit reached")
        window = self.db.now() - self.settings.reflection.consolidation_window_days * SECONDS_PER_DAY
        new = [r[0] for r in self.db.execute(
            "SELECT id FROM active_memories WHERE id > ? AND created_at >= ? ORDER BY id LIMIT ?",
            (start, window, int(self.settings.reflection.batch_size)))]
        if not new:
            top = self.db.scalar("SELECT max(id) FROM memories") or 0
            self._set_cursor(max(start, int(top)))
            return Step({**state, "phase": "importance"}, 0.9, "similarity edges done")
        added = self._link_similar(new)
        self._set_cursor(new[-1])
        state = {**state, "edges": state["edges"] + added, "processed": state.get("processed", 0) + len(new)}
        return Step(state, 0.5 + 0.4 * min(1.0, state["processed"] / MAX_NEW_MEMORIES),
                    f"similarity edges for memories up to {new[-1]}")

    def _link_similar(self, new_ids: Sequence[int]) -> int:
        ids, matrix = self._memory_matrix()
        if len(ids) < 2:
            return 0
        row_of = {int(i): n for n, i in enumerate(ids)}
        rows = [row_of[i] for i in new_ids if i in row_of]
        if not rows:
            return 0
        hebbian = self.settings.hebbian
        scores = matrix[rows] @ matrix.T
        scores[np.arange(len(rows)), rows] = -1.0  # never an edge to itself
        keep = min(hebbian.similarity_neighbours, len(ids) - 1)
        nearest = np.argpartition(-scores, keep - 1, axis=1)[:, :keep]
        pairs = [(int(ids[r]), int(ids[c]), float(scores[n, c])) for n, r in enumerate(rows) for c in nearest[n]
                 if scores[n, c] >= hebbian.similarity_edge_threshold]
        with self.db.transaction():
            for a, b, weight in pairs:
                edges.set_edge(self.db, a, b, "similarity", weight)
        return len({(min(a, b), max(a, b)) for a, b, _ in pairs})

    def _memory_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Unit vectors of every active memory, read once per pass."""
        if self._matrix is None:
            ids = np.array([r[0] for r in self.db.execute("SELECT id FROM active_memories ORDER BY id")],
                           dtype=np.int64)
            found: dict[int, np.ndarray] = {}
            for start in range(0, len(ids), VECTOR_CHUNK):
                chunk = ids[start:start + VECTOR_CHUNK]
                found.update(vectors.get_vectors(self.db, "memory", [int(i) for i in chunk]))
            ids = np.array([i for i in ids if int(i) in found], dtype=np.int64)
            matrix = np.stack([found[int(i)] for i in ids]) if len(ids) else np.zeros((0, 1), dtype=np.float32)
            norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            self._matrix = (ids, (matrix / norms).astype(np.float32))
        return self._matrix

    def _set_cursor(self, memory_id: int) -> None:
        self.db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                        "value = excluded.value", (MEMORY_CURSOR_KEY, str(int(memory_id))))


def grounded_summary(text: str, users_words: Sequence[str], min_support: float, dropped: dict[str, int]) -> str:
    """The sentences of a model's summary that are language and whose content words the user said; each other
    sentence is counted in `dropped` under its reason."""
    kept = []
    for sentence in (part.strip() for part in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        problem = language_problem(sentence)
        why = ("not language" if problem else
               "not in its conversations" if lexical_support(sentence, users_words) < min_support else "")
        if why:
            dropped[why] = dropped.get(why, 0) + 1
        else:
            kept.append(sentence)
    return " ".join(kept)


def consolidation_pass(db: Database, settings: Settings, embedder: Embedder,
                       model: StructuredModel | None = None) -> ConsolidationReport:
    """A whole consolidation pass over the store (what one idle-time job does)."""
    return Consolidator(db, settings, embedder, model).run()
