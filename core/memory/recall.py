"""Recall: the memories and episodes that best answer a query, each with its score breakdown and a reason.

Vector KNN (sqlite-vec) and BM25 (FTS5) candidates are fused; an episode also takes a share of its
adjacent turns' and its conversation's scores; a memory takes a share through strong graph edges (one
hop); a row from the time the query names ("in March", core.memory.time_query) counts its own relevance
twice; everything is then rescored with recency (seed 004's nostalgia term), type weight, importance and
confidence (core.memory.scoring). Recall never writes: the turn pipeline records accesses itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterable, Sequence

import numpy as np

from core.config import Settings
from core.errors import InvalidInput
from core.memory import recall_sources as sources
from core.memory import scoring
from core.memory.query import QueryAnalysis, analyse
from core.memory.recall_learning import RecallBlend, factors
from core.memory.recall_explain import explain, hit_text
from core.memory.recall_sources import Candidate
from core.memory.time_query import TimeWindow, time_window
from core.protocols import Embedder
from core.store import sentences
from core.store.db import Database

KINDS = ("memory", "episode")
MAX_K = 1000
# A retriever whose best rows recall may not return (forgotten, trashed) is asked deeper: up to 16x its first depth
# and MAX_DEPTH rows (sqlite-vec's own limit on k).
DEEPEST, MAX_DEPTH = 16, 4096
# Full-text search gives twice the vector search's pool: at the turn's k = 8, LoCoMo R@8 0.7905 / 0.7935 / 0.7948
# with 1x / 1.5x / 2x (1x costs ~1 ms less a recall at 100k and ~4 ms at 10k; quality chosen).
TEXT_SHARE = 2
POOL_PER_HIT = 2  # rescoring lifts rows from deeper in each retriever's list than k (LoCoMo R@50 0.907 → 0.911)
LEADERS_PER_HIT, MIN_LEADERS = 3, 30  # episode matches whose neighbouring turns are looked up (see _leaders)
TIME_WEIGHT = 1.0  # a row from the time the query names ("in March") counts its own relevance twice
SAME_DISTANCE = 1e-6  # a sentence this near the turn's distance is what gave it (float32 rounding)
# Full-text search of one kind (asked at a depth), and its first ranking: id → bm25, best first (_text_search).
TextSearch = tuple[Callable[[int], dict[int, float]], dict[int, float]]


@dataclass(frozen=True)
class RecallHit:
    kind: str  # "memory" or "episode"
    id: int
    text: str
    score: float
    breakdown: dict[str, float]
    why: str
    sentence: str | None = None  # a turn's: the sentence of it that was closest in meaning, when one was


@dataclass(frozen=True)
class RecallResult:
    query: str
    preset: str
    hits: list[RecallHit] = field(default_factory=list)

    def ids(self, kind: str) -> list[int]:
        return [h.id for h in self.hits if h.kind == kind]


def recall(db: Database, embedder: Embedder, query: str, *, k: int = 10, settings: Settings | None = None,
           now: float | None = None, include_history: bool = False, kinds: Sequence[str] = KINDS,
           exclude: Iterable[int] = (), session_id: int | None = None,
           blend: RecallBlend | None = None, embedding: Callable[[], np.ndarray] | None = None) -> RecallResult:
    """The top-k memories and episodes for `query`.

    `exclude`: memory ids the user vetoed for this answer. `session_id`: the conversation in progress; its
    newest turns are already in the prompt, so they are not recalled. `include_history` also returns
    invalidated, forgotten and trashed rows (marked as such in `why`). `blend`: what was learnt from the user's
    vetoes, pins and thumbs (core.memory.recall_learning), which re-weighs the memories' terms. `embedding`: the
    query's vector once it is ready, from a caller that started making it already (the turn does: full-text search,
    which needs no vector, reads the store meanwhile); by default recall embeds the query after that search."""
    settings = settings or Settings()
    k, kinds, vetoed = _checked(k, kinds, exclude)
    analysis = analyse(query)
    weights = scoring.preset(settings.recall.preset)
    has_vectors = sources.check_embedder(db, embedder.name, embedder.dimension)
    skip = _in_context(db, session_id, settings)
    pool = max(int(settings.recall.candidates), POOL_PER_HIT * k)
    excluded = {kind: vetoed if kind == "memory" else skip for kind in kinds}
    texts = {kind: _text_search(db, kind, analysis, pool, excluded[kind]) for kind in kinds}
    vector = (embedding or partial(_embedded, embedder, analysis.text))() if has_vectors else None
    now = now or db.now()
    window = time_window(analysis.text, now)
    scored: list[_Scored] = []
    for kind in kinds:
        found = _gather(db, kind, vector, pool, excluded[kind], include_history, texts[kind])
        if vector is not None:
            _fill_distances(db, kind, vector, found)
        best_bm25 = min((c.bm25 for c in found.values() if c.bm25 is not None), default=0.0)
        own = {i: _own_relevance(c, best_bm25, weights) for i, c in found.items()}
        if kind == "episode":
            context = _episode_context(db, vector, found, own, weights, include_history, skip, _leaders(k))
        else:
            context = _graph_context(db, vector, found, own, weights, settings, include_history, vetoed)
        speakers = _named_speakers(analysis, found) if kind == "episode" else set()
        scored.extend(_rescore(c, own.get(i, 0.0), context.get(i, {}) | {"speaker": i in speakers,
                               "in_window": _in_window(c, window)}, weights, settings, now) for i, c in found.items())
    if blend is not None and blend.active:
        _learnt(scored, blend, weights)
    scored.sort(key=lambda s: (-s.score, s.candidate.kind, s.candidate.id))
    relevant = [s for s in scored if s.relevance > 0]  # recency alone is no reason to recall
    matched = _matched_sentences(db, vector, relevant[:k])
    hits = [_hit(s, analysis, window, matched.get(s.candidate.id) if s.candidate.kind == "episode" else None)
            for s in relevant[:k]]
    return RecallResult(query=analysis.text, preset=settings.recall.preset, hits=hits)


@dataclass
class _Scored:
    """A candidate's score, and the terms it was made of: read as a breakdown only for the few recall returns (a
    turn scores ~250 candidates and returns 8; building every breakdown cost ~0.4 ms a recall at 100k)."""
    candidate: Candidate
    score: float
    relevance: float
    terms: tuple[float, ...]  # BREAKDOWN_TERMS' values, in order
    context: dict  # what lent this hit its context: a neighbouring turn or a linked memory
    similarity_floor: float
    _breakdown: dict[str, float] | None = None

    @property
    def breakdown(self) -> dict[str, float]:
        if self._breakdown is None:
            candidate = self.candidate
            similarity = scoring.vector_similarity(candidate.distance, self.similarity_floor) \
                if candidate.distance is not None else 0.0
            self._breakdown = {"similarity": round(similarity, 4),
                               "bm25": float(-candidate.bm25) if candidate.bm25 is not None else 0.0,
                               **dict(zip(BREAKDOWN_TERMS, self.terms)), "score": self.score}
        return self._breakdown

    @property
    def links(self) -> dict[str, float]:
        context = self.context
        return {"neighbour_id": context.get("neighbour_id", 0), "graph_from": context.get("graph_from", 0),
                "replies": int(bool(context.get("replies"))), "edge": context.get("edge_weight", 0.0)}


BREAKDOWN_TERMS = ("own", "neighbour", "session", "graph", "speaker", "time", "asks", "relevance", "recency",
                   "type_weight", "importance", "confidence")


def _checked(k: object, kinds: Sequence[str], exclude: Iterable[int]) -> tuple[int, tuple[str, ...], set[int]]:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be a whole number from 1 to {MAX_K}, not {k!r}")
    kinds = tuple(dict.fromkeys(kinds))
    if not kinds or any(kind not in KINDS for kind in kinds):
        raise InvalidInput(f"kinds must be some of {', '.join(KINDS)}, not {kinds!r}")
    try:
        vetoed = {int(i) for i in exclude}
    except (TypeError, ValueError):
        raise InvalidInput(f"exclude must be memory ids, not {exclude!r}") from None
    return k, kinds, vetoed


def _in_context(db: Database, session_id: int | None, settings: Settings) -> set[int]:
    if session_id is None:
        return set()
    return sources.in_context_turns(db, session_id, settings.generation.history_turns)


def _embedded(embedder: Embedder, text: str) -> np.ndarray:
    return embedder.embed([text])[0]


def _text_search(db: Database, kind: str, analysis: QueryAnalysis, pool: int,
                 excluded: set[int]) -> TextSearch:
    """Full-text search, and its first ranking (as deep as _gather first asks it): it needs no vector, so it runs
    before recall waits for the query's embedding."""
    fetch = partial(sources.bm25_candidates, db, kind, _topic_terms(db, kind, analysis))
    return fetch, fetch(_first_depth(pool * TEXT_SHARE, excluded))


def _first_depth(wanted: int, excluded: set[int]) -> int:
    """How deep a retriever is asked first: its share of the pool, and the rows recall may not return on top."""
    return min(wanted + len(excluded), max(wanted, MAX_DEPTH))


def _gather(db: Database, kind: str, vector: np.ndarray | None, pool: int, excluded: set[int],
            include_history: bool, text: TextSearch) -> dict[int, Candidate]:
    """The best rows recall may return: `pool` of the vector search's, TEXT_SHARE times that of full-text search's.
    Rows it may not return are ranked by the retrievers too: the `excluded` few (vetoed, already in the prompt)
    are asked for on top, and a retriever left short by the others (forgotten, trashed: unless `include_history`)
    is asked again, deeper, while it has more to give — a store whose nearest rows forgetting has archived still
    fills its pool, and one with nothing archived is asked once. `text`: full-text search and its first ranking
    (_text_search)."""
    rows: dict[int, dict] = {}
    active: dict[int, bool] = {}  # a vector whose row is gone: none

    def note(ids: Iterable[int], load: bool) -> None:
        unknown = [i for i in ids if i not in active]
        if load:
            rows.update(loaded := sources.load_rows(db, kind, unknown))
            active.update({i: sources.is_active(row) for i, row in loaded.items()})
        else:  # rows recall will mostly pass over: their state only
            active.update(sources.activity(db, kind, unknown))

    def keep(ids: list[int]) -> set[int]:
        # The vector search asks first about its pool's worth of rows, which recall loads anyway; then, past
        # archived rows, about four times as many at a time, mostly ones it will pass over: their state only.
        note(ids, load=not active)
        return _usable(active, excluded, include_history).intersection(ids)

    retrievers: dict[str, Callable[[int], dict[int, float]]] = {}
    if vector is not None:  # it passes over unusable rows before it rescores any, so one search fills its pool
        retrievers["distance"] = partial(sources.vector_candidates, db, kind, vector, keep=keep)
    retrievers["bm25"] = text[0]
    wanted = {name: pool * TEXT_SHARE if name == "bm25" else pool for name in retrievers}
    first = {name: _first_depth(want, excluded) for name, want in wanted.items()}
    ranked = {name: text[1] if name == "bm25" else fetch(first[name]) for name, fetch in retrievers.items()}
    note({i for found in ranked.values() for i in found}, load=True)
    usable = _usable(active, excluded, include_history)
    # Asked again, deeper, while short and full: full-text search, and the vector search where it bit-scans (a
    # partition not yet packed), which cannot pass over unusable rows.
    for name, fetch in retrievers.items():
        depth, limit = first[name], min(MAX_DEPTH, first[name] * DEEPEST)
        while (kept := len(usable.intersection(ranked[name]))) < wanted[name] and len(ranked[name]) >= depth \
                and depth < limit:
            depth = _deeper(depth, kept, wanted[name], limit)
            ranked[name] = fetch(depth)
            note(ranked[name], load=False)
            usable = _usable(active, excluded, include_history)
    best = {name: [i for i in scores if i in usable][:wanted[name]] for name, scores in ranked.items()}  # best first
    rows.update(sources.load_rows(db, kind, {i for ids in best.values() for i in ids if i not in rows}))
    found: dict[int, Candidate] = {}
    for name, ids in best.items():
        for i in [j for j in ids if j in rows]:  # a row another process purged since its state was read is gone
            setattr(found.setdefault(i, Candidate(kind, i, row=rows[i])), name, ranked[name][i])
    return found


def _usable(active: dict[int, bool], excluded: set[int], include_history: bool) -> set[int]:
    """The rows recall may return, of those whose state is known."""
    return {i for i, alive in active.items() if (alive or include_history) and i not in excluded}


def _deeper(depth: int, kept: int, wanted: int, limit: int) -> int:
    """How deep to ask next: as deep as the share of usable rows so far says `wanted` needs, a quarter more, and at
    least twice as deep — one more query, not a ladder of them."""
    share = kept / depth
    needed = int(wanted / share * 1.25) + 1 if share > 0 else limit
    return min(limit, max(2 * depth, needed))


def _topic_terms(db: Database, kind: str, analysis: QueryAnalysis) -> tuple[str, ...]:
    """The words BM25 looks for in turns: a name of someone who spoke says *who*, which the speaker bonus
    weighs; as a word it would match the other person's turns that address them ("Thanks, Ana!"), which are
    rarely the answer (LoCoMo dev: 97% of the evidence of a question naming a speaker is that speaker's)."""
    if kind != "episode":
        return analysis.terms
    names = sources.speaker_terms(db, analysis.terms)
    topic = tuple(t for t in analysis.terms if t not in names)
    return topic or analysis.terms


def _fill_distances(db: Database, kind: str, vector: np.ndarray, found: dict[int, Candidate]) -> None:
    """Full-text matches that the KNN did not reach still get their exact similarity."""
    missing = [i for i, c in found.items() if c.distance is None]
    for i, distance in sources.distances_to(db, kind, vector, missing).items():
        found[i].distance = distance


def _own_relevance(candidate: Candidate, best_bm25: float, weights: scoring.ScoringWeights) -> float:
    """The fused score of the two retrievers; BM25 as a share of the best full-text match's."""
    similarity = _similarity(candidate, weights)
    bm25 = scoring.bm25_normalised(candidate.bm25, best_bm25) if candidate.bm25 is not None else 0.0
    return scoring.fused(similarity, bm25, weights)


def _similarity(candidate: Candidate, weights: scoring.ScoringWeights) -> float:
    if candidate.distance is None:
        return 0.0
    return scoring.vector_similarity(candidate.distance, weights.similarity_floor)


def _leaders(k: int) -> int:
    """How many of the best episode matches bring their neighbouring turns in. A turn brought in by a
    weaker match has only its own similarity and a share of that weak match: it cannot reach the top k."""
    return max(LEADERS_PER_HIT * k, MIN_LEADERS)


def _episode_context(db: Database, vector: np.ndarray | None, found: dict[int, Candidate], own: dict[int, float],
                     weights: scoring.ScoringWeights, include_history: bool, skip: set[int],
                     leaders: int) -> dict[int, dict]:
    """Adjacent turns lend each other relevance (the answer follows the question); the best-matching
    conversation lends its turns a little. Neighbours of the `leaders` best matches join the candidates."""
    best_first = sorted(found, key=lambda i: (-own.get(i, 0.0), i))[:leaders]
    neighbours = sources.turn_neighbours(db, best_first, include_history)
    new_ids = {n for ids in neighbours.values() for n in ids if n not in found and n not in skip}
    if new_ids:
        added = {i: Candidate("episode", i, row=row) for i, row in sources.load_rows(db, "episode", new_ids).items()}
        if vector is not None:
            for i, distance in sources.distances_to(db, "episode", vector, list(added)).items():
                added[i].distance = distance
        for i, candidate in added.items():
            own[i] = _own_relevance(candidate, 0.0, weights)
        found.update(added)
        neighbours.update(sources.turn_neighbours(db, list(added), include_history))
    neighbours = _both_ways(neighbours)
    session_best: dict[int | None, float] = {}
    for i, candidate in found.items():
        session = candidate.row.get("session_id")
        if session is not None:
            session_best[session] = max(session_best.get(session, 0.0), own.get(i, 0.0))
    context: dict[int, dict] = {}
    for i, candidate in found.items():
        near = [(scoring.neighbour_share(replies, weights) * own.get(n, 0.0), own.get(n, 0.0), n, replies)
                for n in neighbours.get(i, []) if n in found
                for replies in [_replies_to(candidate.row, found[n].row)]]
        _, score, best, replies = max(near, default=(0.0, 0.0, 0, False))
        session = session_best.get(candidate.row.get("session_id"), 0.0)
        context[i] = {"neighbour": score, "neighbour_id": best, "replies": replies, "session": session}
    return context


def _asks_only(row: dict) -> bool:
    """A turn that is a question with no reply inside it (a conversation between people, or an imported
    chat); an exchange with the assistant holds its own answer."""
    return str(row.get("user_text") or "").rstrip().endswith("?") and not row.get("assistant_text")


def _replies_to(row: dict, neighbour: dict) -> bool:
    """Whether `neighbour` is a question said just before this turn, so this turn is its reply."""
    return _asks_only(neighbour) and (neighbour["created_at"], neighbour["id"]) < (row["created_at"], row["id"])


def _both_ways(neighbours: dict[int, list[int]]) -> dict[int, list[int]]:
    """Adjacency is symmetric: a weaker match next to a leader learns of it from the leader's side."""
    both: dict[int, list[int]] = {i: list(ids) for i, ids in neighbours.items()}
    for i, ids in neighbours.items():
        for n in ids:
            if i not in both.setdefault(n, []):
                both[n].append(i)
    return both


def _graph_context(db: Database, vector: np.ndarray | None, found: dict[int, Candidate], own: dict[int, float],
                   weights: scoring.ScoringWeights, settings: Settings, include_history: bool,
                   vetoed: set[int]) -> dict[int, dict]:
    """One hop through strong edges from the memories that matched (MAGS)."""
    seeds = [i for i, score in own.items() if score > 0]
    context: dict[int, dict] = {}
    for seed, neighbour, weight, kind in sources.strong_edges(db, seeds, settings.recall.graph_hop_min_weight):
        if neighbour in vetoed:
            continue
        boost = scoring.graph_boost(own[seed], weight, weights)
        if boost > context.get(neighbour, {}).get("graph", 0.0):
            context[neighbour] = {"graph": boost, "graph_from": seed, "edge_weight": weight, "edge_kind": kind}
    new_ids = [i for i in context if i not in found]
    rows = sources.load_rows(db, "memory", new_ids)
    distances = sources.distances_to(db, "memory", vector, list(rows)) if vector is not None and rows else {}
    for i, row in rows.items():
        if include_history or sources.is_active(row):
            found[i] = Candidate("memory", i, distance=distances.get(i), row=row)
            own[i] = _own_relevance(found[i], 0.0, weights)
    return {i: c for i, c in context.items() if i in found}


def _named_speakers(analysis: QueryAnalysis, found: dict[int, Candidate]) -> set[int]:
    """Episodes spoken by someone the query names."""
    words = {w.lower() for w in analysis.words}
    return {i for i, c in found.items() if str(c.row.get("speaker", "")).lower() in words}


def _in_window(candidate: Candidate, window: TimeWindow | None) -> bool:
    """Whether the row dates from the time the query names (an episode's turn time, a memory's creation)."""
    return window is not None and window.contains(float(candidate.row.get("created_at") or 0.0))


def _rescore(candidate: Candidate, own: float, context: dict, weights: scoring.ScoringWeights,
             settings: Settings, now: float) -> _Scored:
    row = candidate.row
    neighbour, session, graph = context.get("neighbour", 0.0), context.get("session", 0.0), context.get("graph", 0.0)
    speaker = scoring.speaker_bonus(own, context.get("speaker", False), weights)
    when = TIME_WEIGHT * own if context.get("in_window") else 0.0
    relevance = scoring.with_context(own, neighbour, session, weights, context.get("replies", False))
    asks = candidate.kind == "episode" and _asks_only(row)
    relevance = scoring.as_asked(relevance + graph + speaker + when, asks, weights)
    last_seen = max(row["created_at"] or 0.0, row["last_access"] or 0.0)
    recency = scoring.recency(now - last_seen, settings.recall.recency_half_life_days, weights.recency_cap)
    type_weight = weights.type_weights.get(row["type"], 1.0)
    retrieval = scoring.retrieval_score(relevance, recency, type_weight)
    score = scoring.final_score(retrieval, row["importance"], row["confidence"], weights)
    terms = (own, neighbour, session, graph, speaker, when, float(asks), relevance, recency, type_weight,
             float(row["importance"]), float(row["confidence"]))
    return _Scored(candidate, score, relevance, terms, context, weights.similarity_floor)


def _learnt(scored: list[_Scored], blend: RecallBlend, weights: scoring.ScoringWeights) -> None:
    """Memories re-weighed by the blend learnt from the user (turns are not: the user's signals are about memories)."""
    memories = [s for s in scored if s.candidate.kind == "memory"]
    for s, factor in zip(memories, factors(blend, [s.breakdown for s in memories],
                                           [s.candidate.row for s in memories], weights)):
        s.score *= float(factor)
        s.breakdown.update(learnt=float(factor), score=s.score)


def _hit(scored: _Scored, analysis: QueryAnalysis, window: TimeWindow | None = None,
         sentence: str | None = None) -> RecallHit:
    candidate = scored.candidate
    text = hit_text(candidate)
    return RecallHit(kind=candidate.kind, id=candidate.id, text=text, score=scored.score,
                     breakdown=scored.breakdown, why=explain(scored, analysis, text, window, sentence),
                     sentence=sentence)


def _matched_sentences(db: Database, vector: np.ndarray | None, chosen: list[_Scored]) -> dict[int, str]:
    """turn id → the sentence that made a returned turn close in meaning, where one did (not the turn as a whole):
    a long turn's hit then says which of its sentences answered."""
    turns = {s.candidate.id: s.candidate for s in chosen if s.candidate.kind == "episode"
             and s.candidate.distance is not None and s.breakdown["similarity"] > 0}
    if vector is None or not turns:
        return {}
    nearest = sentences.nearest_spans(db, vector, list(turns))
    return {i: turns[i].row["user_text"][start:end] for i, (start, end, distance) in nearest.items()
            if distance <= (turns[i].distance or 0.0) + SAME_DISTANCE}  # never None: `turns` kept those with one
