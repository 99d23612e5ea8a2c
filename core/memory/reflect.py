"""Reflection (KenLM): after a session ends, or on request, the model reviews it and learns about the user.

`reflect_session(db, settings, model, session_id, embedder=None)`:

1. The session's episodes, the open learning goals and the known hypotheses go to the model
   (core.prompts.reflect, structured output). It may call a search tool — action "search" with a query —
   up to max_tool_calls times; each call returns search_results past episodes (BM25 over the episodes'
   full-text index, plus vector neighbours when an embedder is given), quoted as data.
2. Its final answer upserts hypotheses. Evidence ids the model never saw are dropped, and a claim without
   evidence is ignored; so is a claim that is not language (core.memory.language) or that its evidence — the
   user's words in the episodes it cites — does not support (core.memory.grounding, Settings.grounding).
   A claim that matches a known hypothesis (same dimension; same words, or cosine ≥ CLAIM_MATCH with an
   embedder) gains only the evidence episodes it did not have: confidence starts at
   initial_confidence and rises by evidence_step per NEW episode, up to max_confidence. A rejected
   hypothesis stays rejected unless at least reopen_new_evidence new episodes support it — never on the
   same evidence.
3. Learning goals are opened (an identical open question is reused) and closed when answered — a question
   only when it is language and its cited episodes touch on it, an answer only when it is language found in
   the user's words. Everything left out is in the report's `dropped`, with its reason.
4. The session is marked reflected, and the behavioural instructions are rewritten from the confirmed
   profile (a short text, instructions_schema).

B1's context assembly reads `session_instructions(db)`: the model's text when it was written from the
current confirmed profile, else a plain list of the confirmed claims (so a confirmation or rejection made
since is honoured at once), or "" with no confirmed hypotheses.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from core.config import Settings
from core.errors import EngramError, InvalidInput
from core.memory.grounding import lexical_support, reason_counts, reason_head, support
from core.memory.language import language_problem
from core.memory.reconcile import conflict_of
from core.prompts import reflect as prompt
from core.protocols import Embedder, StructuredModel
from core.store import goals, hypotheses, vectors
from core.store.db import Database
from core.store.sessions import get_session, mark_reflected
from core.types import Hypothesis

INSTRUCTIONS_KEY = "behaviour_instructions"
CLAIM_MATCH = 0.85  # cosine at which two claims of one dimension are the same hypothesis
MAX_SESSION_EPISODES = 40  # the newest turns of a long session are reviewed
MAX_REPLY_TOKENS = 1200  # a real tokenizer needs ~4x fewer tokens than the worst-case characters


@dataclass
class ReflectionReport:
    session_id: int | None
    added: list[int] = field(default_factory=list)
    strengthened: list[int] = field(default_factory=list)
    reopened: list[int] = field(default_factory=list)
    kept_rejected: list[int] = field(default_factory=list)
    goals_opened: list[int] = field(default_factory=list)
    goals_closed: list[int] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    instructions: str = ""
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # (hypothesis/goal/answer, its text, why)

    def dropped_counts(self) -> dict[str, int]:
        """'hypothesis not language' → how many, for a report line."""
        return reason_counts(f"{what} {reason_head(why)}" for what, _, why in self.dropped)


def pending_sessions(db: Database, *, quiet_seconds: float | None = None) -> list[int]:
    """Ended sessions not reflected on since their last turn, oldest first. With `quiet_seconds`, a session whose
    last turn is that old has ended too: users seldom say goodbye, they stop typing or quit."""
    quiet_before = db.now() - quiet_seconds if quiet_seconds is not None else None
    return [r[0] for r in db.execute(
        "SELECT s.id FROM sessions s WHERE s.deleted_at IS NULL AND EXISTS "
        "(SELECT 1 FROM episodes e WHERE e.session_id = s.id AND e.deleted_at IS NULL AND "
        "(s.reflected_at IS NULL OR e.created_at > s.reflected_at)) AND (s.ended_at IS NOT NULL OR "
        "(:before IS NOT NULL AND (SELECT max(e.created_at) FROM episodes e WHERE e.session_id = s.id) < :before)) "
        "ORDER BY coalesce(s.ended_at, s.updated_at), s.id", {"before": quiet_before})]


def ended_sessions(db: Database, settings: Settings) -> list[int]:
    """The sessions reflection should review now: ended by hand, or quiet for the settings' session gap."""
    return pending_sessions(db, quiet_seconds=settings.reflection.session_gap_minutes * 60.0)


def reflect_session(db: Database, settings: Settings, model: StructuredModel, session_id: int, *,
                    embedder: Embedder | None = None, progress: Callable[[str], None] | None = None,
                    stop: Callable[[], bool] | None = None) -> ReflectionReport:
    """`progress(words)` hears each step: the turns read, each search, what was kept and left out. `stop()` is asked
    while the model reads the conversation (StructuredModel.generate_json): a yes raises GenerationStopped before
    anything is written, and the session is still waiting to be reflected on."""
    say = progress or (lambda _words: None)
    get_session(db, session_id)  # NotFound for a bad id, before any model call
    episodes = [(r["id"], r["user_text"], r["assistant_text"]) for r in db.query(
        "SELECT id, user_text, assistant_text FROM (SELECT * FROM episodes WHERE session_id = ? AND "
        "deleted_at IS NULL AND forgotten_at IS NULL ORDER BY created_at DESC, id DESC LIMIT ?) "
        "ORDER BY created_at, id", (int(session_id), MAX_SESSION_EPISODES))]
    report = ReflectionReport(session_id)
    say(f"reading {len(episodes)} turn{'' if len(episodes) == 1 else 's'}")
    if episodes:
        reply, seen = _converse(db, settings, model, episodes, embedder, report, say, stop)
        said = _users_words(db, seen)
        with db.transaction():
            _apply_hypotheses(db, settings, reply.get("hypotheses", []), said, embedder, report)
            _apply_goals(db, settings, reply, said, embedder, report)
    kept = len(report.added) + len(report.strengthened) + len(report.goals_opened) + len(report.goals_closed)
    say(f"kept {kept}, left out {len(report.dropped)}"
        + "".join(f"; {what} left out: {text[:50]!r} ({why})" for what, text, why in report.dropped[:3]))
    mark_reflected(db, session_id)
    report.instructions = write_instructions(db, settings, model)
    return report


def _converse(db: Database, settings: Settings, model: StructuredModel, episodes: list[tuple[int, str, str]],
              embedder: Embedder | None, report: ReflectionReport,
              say: Callable[[str], None] = lambda _words: None,
              stop: Callable[[], bool] | None = None) -> tuple[dict, set[int]]:
    """The bounded tool loop: search until the model finishes or the calls run out."""
    seen = {e[0] for e in episodes}
    searches: list[tuple[str, str]] = []
    open_goals = [(g.id, g.question) for g in goals.list_goals(db)]
    known = [f"[{h.dimension}] {h.claim} ({h.status}, confidence {h.confidence:.2f})"
             for h in hypotheses.list_hypotheses(db)[:20]]
    while True:
        schema = prompt.reflection_schema(sorted(seen), [g for g, _ in open_goals])
        messages = prompt.reflection_messages(episodes, open_goals, known, searches)
        reply = model.generate_json(messages, schema, max_tokens=reply_tokens(schema), stop=stop)
        query = str(reply.get("query", "")).strip()
        if reply.get("action") != "search" or not query or len(searches) >= settings.reflection.max_tool_calls:
            return reply, seen
        say(f"searching past conversations for {query[:60]!r}")
        found = search_episodes(db, query, settings.reflection.search_results, exclude=seen, embedder=embedder)
        seen.update(i for i, _, _ in found)
        searches.append((query, prompt.episode_lines(found)))
        report.searches.append(query)


def reply_tokens(schema: dict) -> int:
    """Enough tokens for the longest reply the schema allows, within a cap that fits small context windows."""
    return min(prompt.worst_case_chars(schema), MAX_REPLY_TOKENS)


def search_episodes(db: Database, query: str, k: int, *, exclude: Sequence[int] | set[int] = (),
                    embedder: Embedder | None = None) -> list[tuple[int, str, str]]:
    """The reflection tool: past episodes matching `query` by words (BM25) and, with an embedder, meaning."""
    words = re.findall(r"\w+", query.lower())[:12]
    ids: list[int] = []
    if words:
        match = " OR ".join(f'"{w}"' for w in words)
        ids += [r[0] for r in db.execute("SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? "
                                         "ORDER BY rank LIMIT ?", (match, 4 * k))]
    if embedder is not None:
        ids += [i for i, _ in vectors.knn(db, "episode", embedder.embed([query])[0], 4 * k)]
    skip = {int(i) for i in exclude}
    ordered = list(dict.fromkeys(i for i in ids if i not in skip))
    if not ordered:
        return []
    marks = ",".join("?" * len(ordered))
    rows = {r["id"]: r for r in db.query(f"SELECT id, user_text, assistant_text FROM episodes WHERE id IN ({marks}) "
                                         "AND deleted_at IS NULL AND forgotten_at IS NULL", ordered)}
    return [(i, rows[i]["user_text"], rows[i]["assistant_text"]) for i in ordered if i in rows][:k]


def _users_words(db: Database, episode_ids: set[int]) -> dict[int, str]:
    """What the user said in each episode the model was shown that still exists (evidence must)."""
    ids = sorted(episode_ids)
    if not ids:
        return {}
    rows = db.query(f"SELECT id, user_text FROM episodes WHERE id IN ({','.join('?' * len(ids))}) "
                    "AND deleted_at IS NULL AND forgotten_at IS NULL", ids)
    return {int(r["id"]): r["user_text"] for r in rows}


def grounding_problem(text: str, evidence: list[str], min_support: float, settings: Settings,
                      embedder: Embedder | None) -> str:
    """Why a model's claim is not kept ('' when it is): no evidence, not language, or not supported by it."""
    if not evidence:
        return "cites no episode it was shown"
    problem = language_problem(text)
    if problem:
        return f"not language: {problem}"
    found = support(text, evidence, embedder)
    if not found.passes(min_support, settings.grounding.min_support_cosine):
        return f"not supported by its evidence ({found.describe()})"
    return ""


# -- hypotheses ---------------------------------------------------------------------------------------------
def _apply_hypotheses(db: Database, settings: Settings, proposed: list[dict], said: dict[int, str],
                      embedder: Embedder | None, report: ReflectionReport) -> None:
    for item in proposed:
        evidence = sorted({int(e) for e in item.get("evidence", []) if int(e) in said})
        dimension, claim = str(item.get("dimension", "")).strip(), str(item.get("claim", "")).strip()
        why = (grounding_problem(claim, [said[e] for e in evidence], settings.grounding.min_support, settings,
                                 embedder) or _dimension_problem(dimension))
        if why:
            report.dropped.append(("hypothesis", claim, why))
            continue  # conservative: no claim without evidence the model actually read and that supports it
        try:
            upsert_hypothesis(db, settings, dimension, claim, evidence, embedder=embedder, report=report)
        except InvalidInput as exc:
            report.dropped.append(("hypothesis", claim, str(exc)))  # e.g. only control characters


def _dimension_problem(dimension: str) -> str:
    """A dimension is a short label ("communication_style", "interests"): words joined by '_' or spaces."""
    if not dimension:
        return "no dimension"
    problem = language_problem(dimension.replace("_", " "))
    return f"dimension is not language: {problem}" if problem else ""


def upsert_hypothesis(db: Database, settings: Settings, dimension: str, claim: str, evidence: Sequence[int], *,
                      embedder: Embedder | None = None, report: ReflectionReport | None = None) -> int | None:
    """Add a hypothesis or grow a known one with NEW evidence; returns its id (None: kept rejected).

    Confidence starts low and rises one step per conversation the evidence comes from: a small model citing every
    turn of one chat does not make a claim ready to confirm."""
    report = report if report is not None else ReflectionReport(None)
    r = settings.reflection
    known = matching_hypothesis(db, dimension, claim, embedder)
    if known is None:
        sources = len(evidence_sources(db, evidence))
        confidence = min(r.max_confidence, r.initial_confidence + r.evidence_step * (sources - 1))
        new_id = hypotheses.add_hypothesis(db, dimension, claim, confidence, evidence)
        report.added.append(new_id)
        return new_id
    fresh = sorted(set(int(e) for e in evidence) - set(known.evidence_episode_ids))
    if known.status == "rejected":
        if len(fresh) < r.reopen_new_evidence:
            report.kept_rejected.append(known.id)
            return None
        hypotheses.add_evidence(db, known.id, fresh)
        hypotheses.decide(db, known.id, "open")
        hypotheses.set_confidence(db, known.id, r.initial_confidence)
        report.reopened.append(known.id)
        return known.id
    before = evidence_sources(db, known.evidence_episode_ids)
    added = hypotheses.add_evidence(db, known.id, fresh)
    new_sources = len(evidence_sources(db, [*known.evidence_episode_ids, *added]) - before)
    if new_sources:
        rise = r.evidence_step * new_sources
        hypotheses.set_confidence(db, known.id, min(r.max_confidence, known.confidence + rise))
        report.strengthened.append(known.id)
    return known.id


def evidence_sources(db: Database, episode_ids: Sequence[int]) -> set[tuple[str, int]]:
    """The independent sources among evidence episodes: their conversations (a turn outside one stands alone)."""
    ids = sorted({int(e) for e in episode_ids})
    if not ids:
        return set()
    rows = db.query(f"SELECT id, session_id FROM episodes WHERE id IN ({','.join('?' * len(ids))})", ids)
    return {("session", r["session_id"]) if r["session_id"] is not None else ("episode", r["id"]) for r in rows}


def matching_hypothesis(db: Database, dimension: str, claim: str, embedder: Embedder | None) -> Hypothesis | None:
    """The known hypothesis of this dimension that says the same thing, if any."""
    same_dimension = hypotheses.list_hypotheses(db, dimension=dimension.strip())
    wanted = _normalised(claim)
    for h in same_dimension:
        if _normalised(h.claim) == wanted:
            return h
    if embedder is None or not same_dimension:
        return None
    matrix = embedder.embed([claim] + [h.claim for h in same_dimension])
    unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    scores = unit[1:] @ unit[0]
    best = int(np.argmax(scores))
    return same_dimension[best] if scores[best] >= CLAIM_MATCH else None


def _normalised(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _apply_goals(db: Database, settings: Settings, reply: dict, said: dict[int, str], embedder: Embedder | None,
                 report: ReflectionReport) -> None:
    # a conflict with a pinned or protected memory waits for the user's own choice (reconcile.resolve_conflict)
    open_ids = {g.id for g in goals.list_goals(db) if conflict_of(g) is None}
    for item in reply.get("closed_goals", []):
        goal_id, answer = int(item.get("goal_id", 0)), str(item.get("answer", "")).strip()
        if goal_id not in open_ids:
            continue
        why = _answer_problem(answer, list(said.values()))
        if why:
            report.dropped.append(("answer", answer, why))
            continue
        goals.close_goal(db, goal_id, answer)
        open_ids.discard(goal_id)
        report.goals_closed.append(goal_id)
    for item in reply.get("open_goals", []):
        question = str(item.get("question", "")).strip()
        evidence = [said[int(e)] for e in dict.fromkeys(item.get("evidence", [])) if int(e) in said]
        why = grounding_problem(question, evidence, settings.grounding.min_goal_support, settings, embedder)
        if why:
            report.dropped.append(("goal", question, why))
            continue
        try:
            report.goals_opened.append(goals.open_goal(db, question, reason=str(item.get("reason", ""))))
        except InvalidInput as exc:
            report.dropped.append(("goal", question, str(exc)))


def _answer_problem(answer: str, users_words: list[str]) -> str:
    """A goal closes only on an answer in the user's own words: language, and one of its content words said."""
    if not answer:
        return "no answer"
    problem = language_problem(answer)
    if problem:
        return f"not language: {problem}"
    if lexical_support(answer, users_words) == 0.0:
        return "not in the user's words"
    return ""


# -- behavioural instructions ----------------------------------------------------------------------------
def confirmed_profile(db: Database) -> list[Hypothesis]:
    return hypotheses.list_hypotheses(db, status="confirmed")


def write_instructions(db: Database, settings: Settings, model: StructuredModel | None) -> str:
    """Rewrite the behavioural instructions for the next session from the confirmed profile."""
    profile = confirmed_profile(db)
    text = ""
    if profile and model is not None:
        limit = settings.reflection.max_instructions_chars
        try:
            schema = prompt.instructions_schema(limit)
            reply = model.generate_json(prompt.instructions_messages([f"{h.dimension}: {h.claim}" for h in profile]),
                                        schema, max_tokens=reply_tokens(schema))
            text = str(reply.get("instructions", "")).strip()[:limit]
        except EngramError:
            text = ""  # the getter falls back to the confirmed claims themselves
    payload = {"text": text, "from": sorted(h.id for h in profile),
               "claims": {str(h.id): h.claim for h in profile}}
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
               (INSTRUCTIONS_KEY, json.dumps(payload)))
    return session_instructions(db)


def session_instructions(db: Database) -> str:
    """The behavioural instructions for a new session (B1's context assembly reads this)."""
    profile = confirmed_profile(db)
    if not profile:
        return ""
    raw = db.scalar("SELECT value FROM meta WHERE key = ?", (INSTRUCTIONS_KEY,))
    stored: dict[str, Any] = json.loads(raw) if raw else {}
    current = {str(h.id): h.claim for h in profile}
    if stored.get("text") and stored.get("claims") == current:
        return str(stored["text"])
    return "What the user confirmed about themselves:\n" + "\n".join(f"- {h.claim}" for h in profile)
