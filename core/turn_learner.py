"""Learning from a stored chat turn, after its reply is shown (core.assistant.Assistant.learn runs this).

The turn is claimed first (core.store.turn_learning), so two learners (the chat, the idle job, another process)
never learn it twice; then its episode is embedded for recall and, with a structured model, its facts are extracted
(core.memory.engram, and what the person plainly said by core.memory.said_facts; the model only when the person's
own first-person words hold something the plain patterns did not read, core.memory.unread) and reconciled
(core.memory.reconcile), and the memories the reply used are rated for usefulness, strengthening their edges (not
when the reply drew on none of them: no rating could strengthen anything then). A
model failure is reported in the LearnReport, never raised. `busy()` says a reply needs the model first: asked
before and all through extraction and each fact's reconciliation (between their tokens: a weak model on a CPU can
take minutes), a yes leaves the turn pending (BUSY) — the facts reconciled by then stay, and are skipped when the
turn is learned again; asked before and through the rating, a yes skips only the rating.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from core.config import Settings
from core.errors import EngramError, GenerationStopped
from core.memory import hebbian, recall_learning
from core.memory.engram import Extraction, Fact, extract_facts
from core.memory.attribution import says_in_other_words
from core.memory.index import index_episodes
from core.memory.reconcile import Outcome, learned_from, reconcile_fact
from core.memory.rejected import drop_rejected
from core.memory.said_facts import said_facts, with_plain_facts
from core.memory.unread import model_has_work
from core.prompts.rating import rating_messages, rating_schema
from core.protocols import Embedder, StructuredModel
from core.store import turn_learning, turns
from core.store.db import Database
from core.store.episodes import get_episode
from core.types import EpisodeId, MemoryId

BUSY = "busy: a reply came first"  # LearnReport.skipped when learning gave way; the turn is learned later
PENDING, DONE = turn_learning.PENDING, turn_learning.DONE  # an episode's metadata "learning" (or FAILED: given up)
TAKEN = "taken: learned already, given up, or being learned elsewhere"  # LearnReport.skipped


@dataclass(frozen=True)
class TurnRecord:
    episode_id: EpisodeId | None  # None when incognito
    used: tuple[MemoryId, ...]
    user_text: str = ""
    reply_text: str = ""
    finish_reason: str | None = None
    at: float = 0.0
    incognito: bool = False
    drew_on: tuple[MemoryId, ...] = ()  # the used memories the reply drew on (core.memory.attribution)
    drew_on_turns: tuple[EpisodeId, ...] = ()  # the quoted earlier turns it drew on


@dataclass
class LearnReport:
    skipped: str = ""  # why nothing was learned ("incognito", "no structured model"), or ""
    indexed: bool = False  # the episode's vector was written
    facts: list[Fact] = field(default_factory=list)
    dropped: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # raw fact, why it was not kept
    dates_ignored: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # kept without the model's date
    outcomes: list[Outcome] = field(default_factory=list)
    useful: list[MemoryId] = field(default_factory=list)
    drew_on: list[MemoryId] = field(default_factory=list)  # of the useful: those the reply said in other words
    strengthened: int = 0
    rating_skipped: bool = False  # a reply started during extraction: which memories helped was not rated
    asked_model: bool = False  # extraction asked the model (not when nothing was left unread: core.memory.unread)
    errors: list[str] = field(default_factory=list)


@dataclass
class TurnLearner:
    """Learns stored turns into one store; it writes, so give it a connection of its own when another lane writes."""
    db: Database
    embedder: Embedder
    structured: StructuredModel | None
    settings: Settings

    def learn(self, turn: TurnRecord, *, busy: Callable[[], bool] | None = None,
              on_outcome: Callable[[Outcome], None] | None = None) -> LearnReport:
        """Embed the turn, then extract and reconcile its facts and rate the memories it used — unless `busy()`
        says a reply needs the model first (see the module's docstring: the turn then stays pending).

        The turn is claimed first (core.store.turn_learning): one learned already, given up, or being learned by
        another learner is skipped (TAKEN). What raises is counted against the turn (a busy store is not) and
        raised; after a few failures its learning is given up, and the turn stays as it was stored."""
        if turn.episode_id is None:
            return LearnReport(skipped="incognito" if turn.incognito else "no episode")
        claim = turn_learning.claim(self.db, turn.episode_id, turn_learning.new_owner())
        if claim is None:
            return LearnReport(skipped=TAKEN)
        try:
            report = self._learn_claimed(turn, busy or (lambda: False), on_outcome or (lambda _o: None))
        except BaseException as exc:
            turn_learning.failed(self.db, claim, exc)
            raise
        if report.skipped:
            turn_learning.release(self.db, claim)
        else:
            turn_learning.done(self.db, claim)
        return report

    def _learn_claimed(self, turn: TurnRecord, busy: Callable[[], bool],
                       on_outcome: Callable[[Outcome], None]) -> LearnReport:
        report = LearnReport()
        index_episodes(self.db, self.embedder, [turn.episode_id])
        report.indexed = True
        recall_learning.collect_pins(self.db, self.settings)  # pins made since the last turn teach recall's blend
        if self.structured is None:
            report.skipped = "no structured model"
            return report
        if busy():
            report.skipped = BUSY
            return report
        self._extract_and_reconcile(turn, report, busy, on_outcome)
        if report.skipped:
            return report
        if busy():
            report.rating_skipped = True
        else:
            self._rate_usefulness(turn, report, busy)
        return report

    def stored_turn(self, episode_id: int) -> TurnRecord:
        """A stored turn as `learn` takes it: to learn, later, a turn whose learning was skipped."""
        episode = get_episode(self.db, episode_id)
        return TurnRecord(episode.id, tuple(MemoryId(i) for i in turns.used_memory_ids(self.db, episode.id)),
                          episode.user_text, episode.assistant_text, episode.metadata.get("finish_reason"),
                          episode.created_at, False)

    def _extract_and_reconcile(self, turn: TurnRecord, report: LearnReport, busy: Callable[[], bool],
                               on_outcome: Callable[[Outcome], None]) -> None:
        extraction = self._extraction(turn, report, busy)
        if extraction is None:
            return
        drop_rejected(self.db, extraction)  # what the user said is wrong is not learned again
        report.facts, report.dropped, report.dates_ignored = (extraction.facts, extraction.dropped,
                                                              extraction.dates_ignored)
        for fact in extraction.facts:
            if learned_from(self.db, fact.statement, turn.episode_id) is not None:
                continue  # stored before learning gave way, the last time this turn was learned
            try:
                report.outcomes.append(reconcile_fact(self.db, self.embedder, self.structured, fact,
                                                      turn.episode_id, self.settings, stop=busy))
                on_outcome(report.outcomes[-1])  # written: the chat shows it now, not when the turn ends
            except GenerationStopped:
                report.skipped = BUSY  # what is stored stays; the rest is learned with the turn, later
                return
            except EngramError as exc:
                report.errors.append(f"reconcile {fact.statement[:60]!r}: {exc}")

    def _extraction(self, turn: TurnRecord, report: LearnReport, busy: Callable[[], bool]) -> Extraction | None:
        """The turn's facts: those found before its learning last gave way (kept with the turn: a resumed
        learning does not ask the model again), or the model's and the plainly said ones now. None: gave way."""
        kept = turn_learning.extracted(self.db, turn.episode_id)
        if kept is not None:
            return Extraction([Fact(**fact) for fact in kept])
        plain = (said_facts(turn.user_text, turn.reply_text, turn.at, self.settings)
                 if self.settings.grounding.plain_facts else Extraction())
        if not model_has_work(turn.user_text, plain):  # chit-chat, or all read by the plain patterns already
            extraction = with_plain_facts(Extraction(), plain)
            turn_learning.keep_extracted(self.db, turn.episode_id, [asdict(f) for f in extraction.facts])
            return extraction
        report.asked_model = True
        try:
            extraction = extract_facts(self.structured, turn.user_text, turn.reply_text, turn.at,
                                         self.settings, stop=busy)
        except GenerationStopped:
            report.skipped = BUSY  # nothing was written yet: the whole turn is learned when the chat is quiet
            return None
        except EngramError as exc:
            report.errors.append(f"engram: {exc}")
            return with_plain_facts(Extraction(), plain)  # what the person plainly said is still learned
        extraction = with_plain_facts(extraction, plain)
        turn_learning.keep_extracted(self.db, turn.episode_id, [asdict(f) for f in extraction.facts])
        return extraction

    def _rate_usefulness(self, turn: TurnRecord, report: LearnReport, busy: Callable[[], bool]) -> None:
        rows = turns.used_rows(self.db, turn.episode_id)
        candidates = [r for r in rows if r["vetoed_at"] is None]
        if not candidates:
            return
        in_other_words = self._paraphrased(turn, candidates, [r["memory_id"] for r in candidates])
        if not in_other_words and not any(r["drew_on"] for r in candidates):
            return  # the reply drew on none of them, in its words or in other words: no rating could count (below)
        notes = [r["statement"] for r in candidates]
        try:
            answer = self.structured.generate_json(rating_messages(turn.user_text, turn.reply_text, notes),
                                                   rating_schema(len(notes)), max_tokens=32 + 4 * len(notes),
                                                   stop=busy)
        except GenerationStopped:
            report.rating_skipped = True
            return
        except EngramError as exc:
            report.errors.append(f"rating: {exc}")
            return
        picked = {int(n) for n in answer.get("useful", []) if 1 <= int(n) <= len(candidates)}
        report.useful = [MemoryId(candidates[n - 1]["memory_id"]) for n in sorted(picked)]
        paraphrased = report.drew_on = [m for m in in_other_words if m in report.useful]
        # Only a useful memory the reply drew on (in its words or in other words) strengthens an edge: a weak model
        # rates everything useful, and Hebbian edges would then join whatever recall happened to put side by side.
        # So where the reply drew on none, the model is not asked (a call a turn, minutes on a CPU) and the used
        # memories stay unrated (reply_memories.useful NULL).
        drawn = {r["memory_id"] for r in candidates if r["drew_on"]} | set(paraphrased)
        with self.db.transaction():
            turns.set_useful(self.db, turn.episode_id, [r["memory_id"] for r in candidates], report.useful)
            report.strengthened = hebbian.reinforce(self.db, [m for m in report.useful if m in drawn],
                                                    self.settings.hebbian, at=turn.at)
            hebbian.touch(self.db, paraphrased, at=turn.at)
            turns.mark_drew_on(self.db, turn.episode_id, paraphrased)

    def _paraphrased(self, turn: TurnRecord, rows: list[dict], useful: list[MemoryId]) -> list[MemoryId]:
        """The memories among `useful` that finish did not count as used (reply_memories.drew_on: the reply's words
        were not theirs), where the reply says them in other words: a weak model calls everything useful, and a use
        keeps a memory from being forgotten, so the rating's claim is checked as any model output is
        (core.memory.attribution.says_in_other_words)."""
        claimed = [r for r in rows if not r["drew_on"] and r["memory_id"] in useful]
        meant = says_in_other_words(turn.user_text, turn.reply_text, [r["statement"] for r in claimed],
                                    self.embedder, self.settings.grounding)
        return [MemoryId(r["memory_id"]) for r, yes in zip(claimed, meant) if yes]


def pending_learning(db: Database, limit: int = 100) -> list[EpisodeId]:
    """Stored turns not learned from yet (skipped while busy, or the app quit first), oldest first; not those a
    live learner holds, nor one waiting to be tried again after a failure (core.store.turn_learning)."""
    return [EpisodeId(i) for i in turn_learning.pending(db, limit)]
