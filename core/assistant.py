"""The turn pipeline: recall → context → answer → episode → engram → reconcile → rating → Hebbian.

API (stable; callers run the steps on different lanes, none of them touches Qt):

    assistant = Assistant(db, embedder, chat, structured, settings, clock)
    prepared = assistant.prepare(session_id, user_text, incognito=False, dial="normal", exclude=(),
                                 history=None)                                     # db lane
    for chunk in assistant.stream(prepared, sampling=None, cancel=event): ...      # model lane
    record = assistant.finish(prepared, reply_text, finish_reason, replaces=None)  # db lane
    report = assistant.learn(record, busy=...)  # after the reply is shown; it writes: give it its own connection
    later = assistant.learn(assistant.stored_turn(episode_id))  # a turn left waiting (pending_learning(db))
    assistant.veto(episode_id, memory_id)       # a chip removed: lower its edges; re-prepare with exclude=[memory_id]
    assistant.rate(episode_id, +1 | -1 | None)  # thumbs
    reply = assistant.reply(session_id, user_text, ...)  # all of the above in one call (CLI, tests)

- prepare reads only: recall (core.memory.recall), critical facts for the request's intent, this session's
  instructions and latest turns, confirmed hypotheses; it returns a PreparedTurn with the messages and `used`,
  the memories put in the context (UsedMemory: id, text, why, score, critical) — the chips under the reply.
- The memory dial (off / light / normal / eager) scales how many memories are recalled; off reads no memory.
- finish writes the episode, which memories it used (table reply_memories), the access counts of the memories
  and turns the reply drew on (core.memory.attribution) and the co-activation of their edges, in one
  transaction. `replaces=episode_id` rewrites that episode's reply instead (a re-answer after a veto).
  Incognito writes nothing at all and returns episode_id None.
- learn (core.turn_learner) embeds the episode for later recall, then (with a structured model) extracts facts
  (core.memory.engram),
  reconciles each (core.memory.reconcile), rates which used memories were useful and strengthens their edges.
  It never raises for a model failure: the LearnReport lists what failed. Incognito: skipped.
- Learning never stands in a reply's way (issue 17): finish stores a new turn marked as waiting to be learned
  (metadata "learning": "pending"); learn marks it "done" once its facts are extracted and reconciled (model
  failures included: they are reported, not retried). `busy()` says a reply is being made or a message waits for
  one: asked before extraction, a yes skips learning (report.skipped == BUSY) and the turn stays pending — stored,
  embedded, recallable word for word — until the chat is quiet again or `engram reflect` learns it
  (pending_learning, stored_turn); asked again before the usefulness rating, a yes skips only the rating.
  learn claims the turn first, so two learners (the chat, the idle job, another process) never learn it twice; a
  turn whose learning raises is tried again later and given up after three tries (core.store.turn_learning).
Recalled memories are quoted as data, never instructions (core.prompts.answer).
Recall's blend learns from vetoes, thumbs and pins with the terms finish stored (core.memory.recall_learning).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from core.config import Settings
from core.errors import InvalidInput, NotFound
from core.loop_trim import goes_round, without_loop
from core.memory import attribution, hebbian, recall_learning
from core.memory.context import AssembledContext, ContextItem, ContextParts, CountedTokens, assemble
from core.memory.critical import IntentClassifier, critical_memory_ids, relations_for
from core.memory.dates import iso_day
from core.memory.query import query_of_message
from core.memory.recall import recall
from core.memory.recall_explain import turn_text
from core.memory.reflect import session_instructions
from core.prompt_echo import ECHO, stopping_at_echo
from core.protocols import ChatMessage, ChatModel, Embedder, GenerationChunk, SamplingParams, StructuredModel
from core.store import branches, turns
from core.store.db import Database
from core.store.episodes import add_episode, get_episode, list_episodes
from core.store.memories import get_memories
from core.store.sessions import get_session, touch_session
from core.store.text import clean_text
from core.turn_learner import (BUSY, DONE, PENDING, TAKEN, LearnReport, TurnLearner, TurnRecord,  # noqa: F401
                               pending_learning)  # BUSY, DONE, TAKEN, pending_learning: this module's API too
from core.types import Episode, EpisodeId, MemoryId, SessionId

DIALS = ("off", "light", "normal", "eager")
RATINGS = (1, -1, None)


@dataclass(frozen=True)
class UsedMemory:
    """A memory put in a reply's context: a chip under the reply."""
    id: MemoryId
    text: str
    why: str
    score: float = 0.0
    critical: bool = False


@dataclass(frozen=True)
class PreparedTurn:
    session_id: SessionId | None
    user_text: str
    messages: tuple[ChatMessage, ...]
    used: tuple[UsedMemory, ...]
    at: float  # the turn's time: date words in it resolve against this
    incognito: bool = False
    dial: str = "normal"
    exclude: tuple[MemoryId, ...] = ()
    used_episodes: tuple[EpisodeId, ...] = ()  # earlier conversation turns quoted in the context
    intents: tuple[str, ...] = ()
    context_tokens: int = 0
    left_out: tuple[int, ...] = ()  # memory ids recalled but cut by the token budget
    recall_terms: dict[str, Any] | None = None  # the used memories' recall terms (core.memory.recall_learning)
    episode_texts: tuple[str, ...] = ()  # the quoted turns' text, as used_episodes orders them
    episode_whys: tuple[str, ...] = ()  # why recall found each quoted turn, as used_episodes orders them


@dataclass(frozen=True)
class Reply:
    text: str
    finish_reason: str | None
    prepared: PreparedTurn
    record: TurnRecord
    learned: LearnReport | None = None

    @property
    def used_ids(self) -> tuple[MemoryId, ...]:
        return self.record.used


class Assistant:
    def __init__(self, db: Database, embedder: Embedder, chat: ChatModel, structured: StructuredModel | None,
                 settings: Settings | None = None, clock: Callable[[], float] | None = None) -> None:
        self.db = db
        self.embedder = embedder
        self.chat = chat
        self.structured = structured
        self.settings = settings or Settings()
        self.clock = clock or db.clock
        self.intents = IntentClassifier(embedder, threshold=self.settings.generation.intent_threshold)
        self._counted: tuple[ChatModel, CountedTokens] | None = None  # the model whose counts are remembered
        self._embedding_lane: ThreadPoolExecutor | None = None  # one thread, made at the first turn

    # -- prepare (db lane; reads only) ---------------------------------------------------------------

    def prepare(self, session_id: int | None, user_text: str, *, incognito: bool = False, dial: str | None = None,
                exclude: Sequence[int] = (), history: Sequence[tuple[str, str]] | None = None,
                edits: int | None = None) -> PreparedTurn:
        """`history`: (user, assistant) turns kept by the caller, oldest first — an incognito conversation's
        earlier turns, which are never stored; by default the session's stored turns (none when incognito).
        `edits`: the stored turn this message is an edited version of: the conversation is what was shown before
        it, and neither it nor what followed it is recalled for this answer (core.store.branches)."""
        user_text = clean_text(user_text, "message")
        dial = self.settings.memory_dial if dial is None else dial
        if dial not in DIALS:
            raise InvalidInput(f"memory dial must be one of {', '.join(DIALS)}, not {dial!r}")
        session = None if session_id is None else get_session(self.db, session_id)
        excluded = tuple(MemoryId(int(i)) for i in exclude)
        now = self.clock()
        k = round(self.settings.recall.k * self._dial_share(dial))
        reading = k > 0 and not incognito
        recent = [] if incognito else self._session_episodes(session_id, before=edits)
        replaced = set(branches.line_from(self.db, edits)) if edits is not None else set()
        critical: list[ContextItem] = []
        intents: list[str] = []
        recalled: list[ContextItem] = []
        hits: list[Any] = []
        if reading:
            query = query_of_message(user_text)
            embedding = self._embedding_soon(query)
            recalled, hits = self._recalled(query, k, now, excluded, session_id, {e.id for e in recent} | replaced,
                                            embedding)
            critical, intents = self._critical(user_text, excluded, embedding if query == user_text else None)
            first = {c.id for c in critical}  # a critical fact stands first; recall's copy of it is left out
            recalled = [i for i in recalled if not (i.kind == "memory" and i.id in first)]
        if history is None:
            history = [(e.user_text, e.assistant_text) for e in reversed(recent) if e.assistant_text]
        instructions = session_instructions(self.db) if reading else ""  # what reflection learned of style
        own = session.instructions if session is not None else ""  # the user's, written for this conversation
        parts = ContextParts(user_text=user_text, today=iso_day(now), critical=critical, recalled=recalled,
                             instructions=instructions, own_instructions=own,
                             profile=self._profile(instructions + own) if reading else (), history=history,
                             memory_read=reading)
        built = assemble(parts, self._token_counts(), self._budget())
        prepared = _prepared(session_id, user_text, built, now, incognito, dial, excluded, intents)
        return replace(prepared, recall_terms=recall_learning.snapshot(hits, [m.id for m in prepared.used],
                                                                       self.settings))

    def _token_counts(self) -> CountedTokens:
        """The chat model's token counts, remembered across turns (made again if the model was swapped)."""
        if self._counted is None or self._counted[0] is not self.chat:
            self._counted = (self.chat, CountedTokens(self.chat.count_tokens))
        return self._counted[1]

    def _dial_share(self, dial: str) -> float:
        g = self.settings.generation
        return {"off": 0.0, "light": g.dial_light, "normal": 1.0, "eager": g.dial_eager}[dial]

    def _critical(self, user_text: str, exclude: tuple[MemoryId, ...],
                  embedding: Callable[[], np.ndarray] | None = None) -> tuple[list[ContextItem], list[str]]:
        intents = self.intents.classify(user_text, embedding)
        relations = relations_for(intents)
        ids = [i for i in critical_memory_ids(self.db, relations, self.settings.generation.critical_first)
               if i not in exclude]
        found = get_memories(self.db, ids)
        names = ", ".join(i.name for i in intents)
        items = [ContextItem("memory", m.id, m.statement, f"critical fact ({m.relation}) for a {names} request",
                             score=1.0, critical=True, label=m.relation) for m in (found[i] for i in ids if i in found)]
        return items, [i.name for i in intents]

    def _embedding_soon(self, text: str) -> Callable[[], np.ndarray]:
        """The message's vector, started now on the embedding thread: recall's full-text search reads the store
        meanwhile. A caller gets it (or the embedder's error) by calling what this returns."""
        if self._embedding_lane is None:
            self._embedding_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-query-embedding")
        return self._embedding_lane.submit(lambda: self.embedder.embed([text])[0]).result

    def _recalled(self, query: str, k: int, now: float, exclude: tuple[MemoryId, ...], session_id: int | None,
                  current: set[int], embedding: Callable[[], np.ndarray]) -> tuple[list[ContextItem], list[Any]]:
        """Recall's hits minus the turns already in the history; all hits."""
        result = recall(self.db, self.embedder, query, k=k, settings=self.settings, now=now, exclude=exclude,
                        session_id=session_id, blend=recall_learning.effective(self.db, self.settings),
                        embedding=embedding)
        unquoted = turns.unquoted_replies(self.db, result.ids("episode"))
        said_at = turns.said_at(self.db, result.ids("episode"))
        items = []
        for hit in result.hits:
            if hit.kind == "episode" and hit.id in current:
                continue
            text = turn_text(*unquoted[hit.id]) if hit.kind == "episode" and hit.id in unquoted else hit.text
            items.append(ContextItem(hit.kind, int(hit.id), text, hit.why, score=float(hit.score),
                                     at=said_at.get(hit.id) if hit.kind == "episode" else None,
                                     sentence=hit.sentence or ""))
        return items, result.hits

    def _session_episodes(self, session_id: int | None, before: int | None = None) -> list[Episode]:
        """This session's latest turns on the branch it shows, newest first (they go in the context as the
        conversation); with `before`, only those shown before that turn (an edit of it is being answered)."""
        if session_id is None:
            return []
        limit = self.settings.generation.history_turns
        if before is None:
            return list_episodes(self.db, session_id=session_id, limit=limit, on_path=True)
        replaced = set(branches.line_from(self.db, before))
        shown = list_episodes(self.db, session_id=session_id, limit=limit + len(replaced), on_path=True)
        return [e for e in shown if e.id not in replaced][:limit]

    def _profile(self, instructions: str) -> list[str]:
        """Confirmed hypotheses not already spelled out in the instructions."""
        claims = [r[0] for r in self.db.execute(
            "SELECT claim FROM hypotheses WHERE status = 'confirmed' ORDER BY confidence DESC, id LIMIT ?",
            (self.settings.generation.profile_limit,))]
        return [c for c in claims if c not in instructions]

    def _budget(self) -> int:
        window = min(self.settings.generation.context_tokens,
                     int(getattr(self.chat, "context_window", self.settings.generation.context_tokens)))
        return max(window - self.settings.generation.max_tokens, 0)

    # -- stream (model lane) -------------------------------------------------------------------------

    def sampling(self) -> SamplingParams:
        g = self.settings.generation
        return SamplingParams(temperature=g.temperature, top_p=g.top_p, max_tokens=g.max_tokens)

    def stream(self, prepared: PreparedTurn, sampling: SamplingParams | None = None, *,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        """The model's reply, chunk by chunk; set `cancel` to stop it (the last chunk says 'cancelled'). A reply
        that starts writing out the prompt's fenced notes ends before them (core.prompt_echo: 'echo')."""
        cancel = cancel or threading.Event()
        return stopping_at_echo(self.chat.stream(list(prepared.messages), sampling or self.sampling(), cancel=cancel),
                                cancel)

    # -- finish (db lane) ----------------------------------------------------------------------------

    def finish(self, prepared: PreparedTurn, reply_text: str, finish_reason: str | None = "stop", *,
               replaces: int | None = None, regenerated: bool = False, edits: int | None = None) -> TurnRecord:
        used = tuple(m.id for m in prepared.used)
        if finish_reason in ("stop", "length") and goes_round(reply_text):
            finish_reason = "repetition"  # it went round before it ended: said once and labelled, as the guard's
        if finish_reason == "repetition":
            reply_text = without_loop(reply_text)  # kept and shown as said once, not thirty times
        elif finish_reason == ECHO:
            reply_text = reply_text.rstrip()  # the space before the fence it began was shown already
        record = TurnRecord(None, used, prepared.user_text, reply_text, finish_reason, prepared.at,
                            prepared.incognito)
        if prepared.incognito:
            return record
        reply_text = clean_text(reply_text, "reply", allow_empty=True)
        drew_on, drew_on_turns = _drawn_on(prepared, reply_text)
        with self.db.transaction():
            if edits is not None:  # the edited turn's line leaves the shown path, kept as the earlier branch
                root = branches.root_of(self.db, edits)
                branches.hide_line(self.db, edits)
            episode_id = self._write_episode(prepared, reply_text, finish_reason, replaces, regenerated,
                                             edit_of=root if edits is not None else None)
            turns.record_used(self.db, episode_id, [(m.id, m.score, m.critical) for m in prepared.used], drew_on)
            recall_learning.remember_reply(self.db, episode_id, prepared.recall_terms)
            hebbian.touch(self.db, drew_on, at=prepared.at)
            turns.touch_episodes(self.db, drew_on_turns, at=prepared.at)
            turns.record_quoted(self.db, episode_id, list(zip(prepared.used_episodes, _whys(prepared))), drew_on_turns)
            hebbian.coactivate(self.db, used, at=prepared.at)
            if prepared.session_id is not None:
                touch_session(self.db, prepared.session_id)
        return TurnRecord(episode_id, used, prepared.user_text, reply_text, finish_reason, prepared.at, False,
                          tuple(drew_on), tuple(drew_on_turns))

    def _write_episode(self, prepared: PreparedTurn, reply_text: str, finish_reason: str | None,
                       replaces: int | None, regenerated: bool = False, edit_of: int | None = None) -> EpisodeId:
        if replaces is None:
            metadata: dict[str, object] = {"finish_reason": finish_reason, "intents": list(prepared.intents),
                                           "dial": prepared.dial, "learning": PENDING}
            if edit_of is not None:
                metadata["edit_of"] = edit_of  # another version of that message (core.store.branches)
            return add_episode(self.db, prepared.user_text, reply_text, session_id=prepared.session_id,
                               created_at=prepared.at, metadata=metadata)
        episode = get_episode(self.db, replaces)
        turns.replace_reply(self.db, episode.id, reply_text, finish_reason, rejected=regenerated)
        return episode.id

    # -- learn (model lane, after the reply is shown; core.turn_learner) -------------------------------

    def learn(self, turn: TurnRecord, *, busy: Callable[[], bool] | None = None,
              on_outcome: Callable[[Any], None] | None = None) -> LearnReport:
        """Embed the turn, then extract and reconcile its facts and rate the memories it used — unless `busy()`
        says a reply needs the model first (see the module's docstring: the turn then stays pending).
        `on_outcome(outcome)` is told of each fact the moment it is written (the chat shows it at once)."""
        return self._learner().learn(turn, busy=busy, on_outcome=on_outcome)

    def stored_turn(self, episode_id: int) -> TurnRecord:
        """A stored turn as `learn` takes it: to learn, later, a turn whose learning was skipped."""
        return self._learner().stored_turn(episode_id)

    def _learner(self) -> TurnLearner:
        # made per call from the assistant's current parts: a structured model set later is the one used
        return TurnLearner(self.db, self.embedder, self.structured, self.settings)

    # -- the user's feedback (db lane) -----------------------------------------------------------------

    def veto(self, episode_id: int, memory_id: int) -> None:
        """The user removed a chip: mark it vetoed, weaken its edges to the others, teach recall (the first time)."""
        rows = turns.used_rows(self.db, episode_id)
        ids = [r["memory_id"] for r in rows]
        if int(memory_id) not in ids:
            raise NotFound(f"memory {memory_id} was not used by reply {episode_id}")
        first = all(r["vetoed_at"] is None for r in rows if r["memory_id"] == int(memory_id))
        with self.db.transaction():
            turns.mark_vetoed(self.db, episode_id, memory_id, self.clock())
            hebbian.weaken(self.db, memory_id, ids, factor=self.settings.hebbian.veto_factor)
            if first:
                recall_learning.learn_veto(self.db, self.settings, episode_id, memory_id)

    def rate(self, episode_id: int, rating: int | None) -> None:
        """Thumbs up (+1), down (-1) or cleared (None); a thumbs up strengthens the reply's memories' edges."""
        if isinstance(rating, bool) or rating not in RATINGS:
            raise InvalidInput("a rating is +1, -1 or None")
        get_episode(self.db, episode_id)
        with self.db.transaction():
            self.db.execute("UPDATE episodes SET rating = ? WHERE id = ?", (rating, int(episode_id)))
            recall_learning.learn_rating(self.db, self.settings, episode_id, rating)
            if rating == 1:
                kept = [r["memory_id"] for r in turns.used_rows(self.db, episode_id) if r["vetoed_at"] is None]
                hebbian.reinforce(self.db, kept, self.settings.hebbian)

    # -- everything at once (CLI, tests) -----------------------------------------------------------------

    def reply(self, session_id: int | None, user_text: str, *, incognito: bool = False, dial: str | None = None,
              exclude: Sequence[int] = (), sampling: SamplingParams | None = None,
              cancel: threading.Event | None = None, on_chunk: Callable[[GenerationChunk], None] | None = None,
              learn: bool = True, history: Sequence[tuple[str, str]] | None = None) -> Reply:
        prepared = self.prepare(session_id, user_text, incognito=incognito, dial=dial, exclude=exclude,
                                history=history)
        parts: list[str] = []
        reason: str | None = None
        for chunk in self.stream(prepared, sampling, cancel=cancel):
            parts.append(chunk.text)
            reason = chunk.finish_reason or reason
            if on_chunk is not None:
                on_chunk(chunk)
        text = "".join(parts)
        record = self.finish(prepared, text, reason)
        learned = self.learn(record) if learn else None
        return Reply(record.reply_text, reason, prepared, record, learned)


def _prepared(session_id: int | None, user_text: str, built: AssembledContext, now: float, incognito: bool,
              dial: str, exclude: tuple[MemoryId, ...], intents: list[str]) -> PreparedTurn:
    used = tuple(UsedMemory(MemoryId(i.id), i.text, i.why, i.score, i.critical)
                 for i in built.included if i.kind == "memory")
    quoted = [i for i in built.included if i.kind == "episode"]
    left_out = tuple(i.id for i in built.left_out if i.kind == "memory")
    return PreparedTurn(None if session_id is None else SessionId(int(session_id)), user_text,
                        tuple(built.messages), used, now, incognito, dial, exclude,
                        tuple(EpisodeId(i.id) for i in quoted), tuple(intents), built.tokens, left_out,
                        episode_texts=tuple(i.text for i in quoted), episode_whys=tuple(i.why for i in quoted))


def _drawn_on(prepared: PreparedTurn, reply_text: str) -> tuple[list[MemoryId], list[EpisodeId]]:
    """The memories and earlier turns of the context the reply drew on (core.memory.attribution): only those count
    as used — their access counts, which forgetting reads. The rest were recalled in case, and stay chips."""
    quoted = list(prepared.episode_texts) + [""] * (len(prepared.used_episodes) - len(prepared.episode_texts))
    drew = attribution.drawn_on(prepared.user_text, reply_text, [m.text for m in prepared.used] + quoted)
    memories = [m.id for m, yes in zip(prepared.used, drew) if yes]
    return memories, [e for e, yes in zip(prepared.used_episodes, drew[len(prepared.used):]) if yes]


def _whys(prepared: PreparedTurn) -> list[str]:
    return list(prepared.episode_whys) + [""] * (len(prepared.used_episodes) - len(prepared.episode_whys))
