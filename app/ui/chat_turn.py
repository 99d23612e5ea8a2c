"""One chat turn spread over the lanes: load the model and stream on the model lane, prepare and finish on the db lane,
then learn on the model lane after the reply is shown. Qt signals carry each step's result to the panel.

Learning never holds up a reply (issue 17): a stored turn joins a queue, and the queue is learned from, one turn at
a time, only while the chat is quiet — no reply being made and no message waiting (`waiting()`, the panel's
queue). A message sent meanwhile goes first: a turn whose learning had not begun is skipped for now (it stays in
the queue, and in the store as waiting to be learned: core.assistant.pending_learning), one being learned stops
before its usefulness rating. What a turn taught shows under its reply whenever its learning ends.

Learning writes to the store from the model lane, so it uses its own connection (Services.learning_db): SQLite
wants one connection per thread, and WAL lets it write while the db lane reads.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from PySide6.QtCore import QObject, QTimer, Signal

from app.ui.chat_learning import LearnNote, failure_note, learn_note, learned_ids, plain_problem, with_taught
from app.ui.chat_model import in_app_words, load_problem, model_name
from core.assistant import BUSY
from core.conditions import LEARNING
from core.errors import EngramError, ModelError
from core.protocols import GenerationChunk
from core.memory.conversation import taught_facts
from core.store import turn_learning
from core.store.memories import get_memories
from core.store.sessions import discard_if_empty


@dataclass(frozen=True)
class ReplyPace:
    """How fast a reply came, as LM Studio shows it: seconds to its first words, tokens a second, tokens."""
    first_token_seconds: float
    tokens_per_second: float
    tokens: int

    def words(self) -> str:
        rate = f" · {self.tokens_per_second:.1f} tok/s" if self.tokens_per_second > 0 else ""
        return f"{self.first_token_seconds:.2f} s to first token{rate} · {self.tokens} tokens"


@dataclass(frozen=True)
class TurnRequest:
    session_id: int | None
    text: str
    incognito: bool = False
    dial: str = "normal"
    exclude: tuple[int, ...] = ()
    replaces: int | None = None  # a re-answer (after a veto) rewrites this stored reply instead of adding one
    regenerate: bool = False  # the user asked for another answer: the replaced one is kept as the one they rejected
    edits: int | None = None  # an edited message: the stored turn it is another version of (core.store.branches)


@dataclass
class _Turn:
    request: TurnRequest
    cancel: threading.Event = field(default_factory=threading.Event)
    prepared: Any = None
    finish_reason: str | None = None
    gate: Any = None  # the ModelGate held while this turn uses the model
    streamed: list[str] = field(default_factory=list)  # the reply as the model lane produced it
    streaming: Future | None = None
    produced_reason: str | None = None
    finishing: Future | None = None  # the store step, once submitted (by the GUI or at quit)
    stream_started: float = 0.0  # when the prompt went to the model (monotonic seconds)
    first_token_at: float | None = None  # when its first words reached the window
    tokens: int = 0  # tokens the model generated for the reply
    rate: float = 0.0  # the model's own tokens per second, as its last chunk said


class TurnController(QObject):
    prepared = Signal(object)  # the PreparedTurn: its `used` memories become chips
    chunk = Signal(str)
    finished = Signal(object, str)  # the TurnRecord (episode id, used ids) and the finish reason
    learned = Signal(object, object)  # the LearnReport (None when learning failed) and the LearnNote for the reply
    learning_state = Signal(object, bool)  # an episode id, and whether its turn now waits or is being learned
    progress = Signal(object)  # a LearnNote of what a turn being learned wrote so far (each fact as it is written)
    failed = Signal(str, bool)  # message, and whether it is because no chat model is available
    idle = Signal()  # the turn is over (finished, stopped or failed): the composer may send again
    pace = Signal(object)  # the reply's ReplyPace (time to first token, tokens a second), when it ends

    def __init__(self, services: Any, runner: Any, parent: QObject | None = None, *,
                 model_gate: Callable[[], Any] | None = None, waiting: Callable[[], bool] | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self._model_gate = model_gate or (lambda: None)  # idle-time jobs that use the model give way to chat
        self._waiting = waiting or (lambda: False)  # a message waits for its reply: learning waits too
        self._turn: _Turn | None = None
        self.to_learn: deque[Any] = deque()  # stored turns (TurnRecords) not learned from yet, oldest first
        self.learning: Any = None  # the TurnRecord being learned from on the model lane
        self._reply_first = threading.Event()  # read on the model lane: a reply is wanted, learning gives way
        self._skip = threading.Event()  # read on the model lane: the user skipped the turn being learned
        self._closed = False
        self._assistants: dict[str, tuple[Any, Any]] = {}  # lane -> (chat engine it was built for, assistant)

    @property
    def busy(self) -> bool:
        return self._turn is not None

    @property
    def preparing(self) -> bool:
        """A turn is running and has not recalled yet (it may be waiting for a model to load)."""
        return self._turn is not None and self._turn.prepared is None

    def start(self, request: TurnRequest) -> None:
        if self._turn is not None:
            raise RuntimeError("a turn is already running")
        turn = self._turn = _Turn(request, gate=self._model_gate())
        self._reply_first.set()
        if turn.gate is not None:
            turn.gate.chat_started()
        def engine() -> Any:  # with the fine-tuned adapter active now, read on this lane's own connection
            try:
                return self.services.chat_engine(adapter_db=self.services.learning_db)
            except EngramError:
                raise
            except Exception as exc:  # MLX, safetensors and tokenizers each raise their own type: say it plainly
                raise EngramError(load_problem(model_name(self.services), exc)) from exc
        self.runner.submit("model", engine, on_done=lambda _engine: self._prepare(turn),
                           on_error=lambda exc: self._fail(turn, exc))

    def stop(self) -> None:
        """Stop the streaming reply; what was said so far is kept and stored."""
        if self._turn is not None:
            self._turn.cancel.set()

    # -- steps ---------------------------------------------------------------------------------------

    def _prepare(self, turn: _Turn) -> None:
        if turn.cancel.is_set():
            self._end(turn)
            return
        r = turn.request

        def work() -> Any:
            return self._assistant("db").prepare(r.session_id, r.text, incognito=r.incognito, dial=r.dial,
                                                 exclude=r.exclude, edits=r.edits)
        self.runner.submit("db", work, on_done=lambda p: self._stream(turn, p), on_error=lambda e: self._fail(turn, e))

    def _stream(self, turn: _Turn, prepared: Any) -> None:
        turn.prepared = prepared
        turn.stream_started = time.monotonic()
        self.prepared.emit(prepared)
        assistant = self._assistant_now("db")

        def produce() -> Iterator[Any]:
            steps = assistant.stream(prepared, cancel=turn.cancel)
            try:
                for chunk in steps:
                    turn.streamed.append(chunk.text)  # kept here too, so a quit mid-reply can still store it
                    turn.produced_reason = chunk.finish_reason or turn.produced_reason
                    yield chunk
                    if turn.cancel.is_set() and chunk.finish_reason is None:
                        yield GenerationChunk("", finish_reason="cancelled")
                        return
            finally:
                steps.close()  # leaving early stops generation on the MLX thread
        turn.streaming = self.runner.stream("model", produce, on_item=lambda c: self._on_chunk(turn, c),
                                            on_done=lambda: self._finish(turn),
                                            on_error=lambda e: self._fail(turn, e))

    def _on_chunk(self, turn: _Turn, chunk: Any) -> None:
        if chunk.text and turn.first_token_at is None:
            turn.first_token_at = time.monotonic()
        turn.tokens = max(turn.tokens, int(getattr(chunk, "generation_tokens", 0) or 0))
        turn.rate = float(getattr(chunk, "tokens_per_second", 0.0) or 0.0) or turn.rate
        if chunk.text:
            self.chunk.emit(chunk.text)
        if chunk.finish_reason:
            turn.finish_reason = chunk.finish_reason

    def _finish(self, turn: _Turn) -> None:
        if turn.finishing is not None:
            return  # stored at quit already
        reason = turn.finish_reason or ("cancelled" if turn.cancel.is_set() else "stop")

        def work() -> Any:
            return self._store(turn, reason)

        def done(record: Any) -> None:
            if turn.first_token_at is not None:
                self.pace.emit(ReplyPace(turn.first_token_at - turn.stream_started, turn.rate, turn.tokens))
            self.finished.emit(record, reason)
            if not turn.request.incognito and turn.request.replaces is None:
                self.to_learn.append(record)  # a re-answer has nothing new from the user to learn
                self.learning_state.emit(getattr(record, "episode_id", None), True)
            self._end(turn)
        turn.finishing = self.runner.submit("db", work, on_done=done, on_error=lambda e: self._fail(turn, e))

    def learn_when_quiet(self) -> None:
        """Learn from the oldest stored turn not learned yet, if the chat is quiet (called when a turn ends, and
        after each learning); the next one follows when this one is done."""
        gate = self._model_gate()
        if (self._closed or self.learning is not None or self._turn is not None or self._waiting()
                or not self.to_learn or self._handed_over(gate)):
            return
        record = self.learning = self.to_learn.popleft()
        self._skip.clear()
        self._reply_first.clear()
        if gate is not None:
            gate.chat_started(LEARNING)  # idle-time jobs wait for chat's learning as for its replies
        episode_id: int = record.episode_id  # to_learn holds stored turns only (not incognito): each has its episode

        def work() -> tuple[Any, LearnNote]:
            db = self.services.learning_db  # this lane's own connection
            written: list[Any] = []

            def wrote(outcome: Any) -> None:  # a fact is in the store: its row shows under the reply now
                written.append(outcome)
                so_far = SimpleNamespace(outcomes=list(written), errors=[])
                found = get_memories(db, learned_ids(so_far))
                self.runner.post(self.progress.emit,
                                 learn_note(episode_id, so_far, {i: m.statement for i, m in found.items()}))
            try:
                report = self._assistant("model").learn(
                    record, busy=lambda: self._reply_first.is_set() or self._skip.is_set() or self._handed_over(gate),
                    on_outcome=wrote)
            except Exception as exc:  # noqa: BLE001 - counted by the store: the note says if Engram tries again
                gave_up = episode_id is not None and bool(turn_learning.given_up(db, [episode_id]))
                return None, failure_note(episode_id, f"{type(exc).__name__}: {exc}", gave_up)
            found = get_memories(db, learned_ids(report))
            note = learn_note(episode_id, report, {i: m.statement for i, m in found.items()})
            return report, with_taught(note, taught_facts(db, [episode_id]).get(episode_id, []))

        def ended(result: tuple[Any, LearnNote] | None) -> None:
            self.learning = None
            if gate is not None:
                gate.chat_finished(LEARNING)
            gave_way = result is not None and result[0] is not None and result[0].skipped == BUSY
            if gave_way and self._skip.is_set():
                self._skip_in_store(episode_id, result[1] if result is not None else None)
            elif gave_way:
                self.to_learn.appendleft(record)  # a reply came first: learned when the chat is quiet again
            elif result is not None:
                self.learning_state.emit(episode_id, False)
                self.learned.emit(*result)
            self.learn_when_quiet()

        def failed(exc: BaseException) -> None:
            self.learning_state.emit(episode_id, False)
            self.learned.emit(None, LearnNote(episode_id, problem=plain_problem(str(exc))))
            ended(None)
        self.runner.submit("model", work, on_done=ended, on_error=failed)

    def adopt_orphans(self) -> None:
        """Turns whose learner's process is gone (a closed `engram chat`) are learned here, at once."""
        if self._closed:
            return
        self.runner.submit("db", turn_learning.orphaned, self.services.db, on_done=self.resume_learning,
                           on_error=lambda _exc: None)  # the next change to the store looks again

    def resume_learning(self, episode_ids: list[int]) -> None:
        """Turns of a reopened conversation still waiting to be learned: this chat learns them when it is quiet,
        through the same claim (the facts stored before a turn gave way are not written again)."""
        known = {getattr(r, "episode_id", None) for r in [*self.to_learn, self.learning]}
        wanted = [int(i) for i in episode_ids if int(i) not in known]
        if not wanted:
            return

        def records() -> list[Any]:
            assistant = self._assistant("model")
            return [assistant.stored_turn(i) for i in wanted]

        def queued(found: list[Any]) -> None:
            known_now = {getattr(r, "episode_id", None) for r in [*self.to_learn, self.learning]}
            for record in found:
                if record.episode_id not in known_now:
                    self.to_learn.append(record)
                    self.learning_state.emit(record.episode_id, True)
            self.learn_when_quiet()
        def failed(_exc: BaseException) -> None:  # no model to learn with now: the idle pass learns them later
            for episode_id in wanted:
                self.learning_state.emit(episode_id, False)
        self.runner.submit("model", records, on_done=queued, on_error=failed)

    def skip_learning(self, episode_id: int) -> None:
        """Skip under a reply: a waiting turn leaves the queue; the one being learned gives way at its next
        token (what it wrote so far stays). The store marks it skipped, so no idle pass learns it either."""
        waiting = next((r for r in self.to_learn if getattr(r, "episode_id", None) == episode_id), None)
        if waiting is not None:
            self.to_learn.remove(waiting)
            self._skip_in_store(episode_id, None)
        elif getattr(self.learning, "episode_id", None) == episode_id:
            self._skip.set()
        else:  # waiting in the store only (an earlier run of the app left it)
            self._skip_in_store(episode_id, None)

    def _skip_in_store(self, episode_id: int, note: LearnNote | None) -> None:
        def done(_skipped: bool) -> None:
            self.learning_state.emit(episode_id, False)
            facts = note.facts if note is not None else ()
            self.learned.emit(None, LearnNote(episode_id, facts, skipped=True))
        self.runner.submit("db", turn_learning.skip, self.services.db, episode_id, on_done=done,
                           on_error=lambda exc: self.failed.emit(f"Could not skip learning: {exc}", False))

    @staticmethod
    def _handed_over(gate: Any) -> bool:
        """A job the user started (Run now) has the model: the chat learns again once it ends (the job learns
        the waiting turns first, from where the chat stopped)."""
        return gate is not None and gate.learning_gives_way()

    def retry_learning(self, episode_id: int, *, on_error: Callable[[BaseException], None]) -> None:
        """Try again to learn a turn Engram stopped trying on: back in the store's queue with fresh tries, then in
        this chat's, learned through the same claim as any other turn (never twice) once the chat is quiet."""
        def requeue() -> Any:
            assistant = self._assistant("model")  # no model to learn with: said, and nothing changed
            turn_learning.requeue(self.services.learning_db, [episode_id])
            return assistant.stored_turn(episode_id)

        def queued(record: Any) -> None:
            self.to_learn.append(record)
            self.learning_state.emit(episode_id, True)
            self.learn_when_quiet()
        self.runner.submit("model", requeue, on_done=queued, on_error=on_error)

    def _store(self, turn: _Turn, reason: str) -> Any:
        return self._assistant("db").finish(turn.prepared, "".join(turn.streamed), reason,
                                            replaces=turn.request.replaces,
                                            regenerated=turn.request.regenerate, edits=turn.request.edits)

    def shutdown(self, timeout: float = 30.0) -> None:
        """The app is quitting: stop the reply and store what was said so far, waiting for both (learning from
        it is left out: the turn stays in the store as waiting to be learned, for `engram reflect`)."""
        self._closed = True
        self._reply_first.set()
        turn = self._turn
        if turn is None:
            return
        turn.cancel.set()
        if turn.streaming is None or turn.request.incognito:
            return
        try:
            turn.streaming.result(timeout)
            if turn.finishing is None:
                turn.finishing = self.runner.submit("db", self._store, turn, turn.produced_reason or "cancelled")
            turn.finishing.result(timeout)
        except Exception:  # noqa: BLE001 - the failure was already delivered to the runner's error list
            return
        finally:
            self._release(turn)

    # -- veto and thumbs -----------------------------------------------------------------------------

    def veto(self, episode_id: int | None, memory_id: int, *, on_done: Callable[[Any], None]) -> None:
        """Lower a memory's weight for a stored reply (incognito replies only exclude it)."""
        if episode_id is None:
            on_done(None)
            return
        self.runner.submit("db", lambda: self._assistant("db").veto(episode_id, memory_id), on_done=on_done,
                           on_error=lambda exc: self.failed.emit(f"Could not veto that memory: {exc}", False))

    def rate(self, episode_id: int, rating: int | None, *, on_done: Callable[[Any], None] | None = None) -> None:
        self.runner.submit("db", lambda: self._assistant("db").rate(episode_id, rating), on_done=on_done,
                           on_error=lambda exc: self.failed.emit(f"Could not save the rating: {exc}", False))

    def undo_learned(self, memory_id: int, trash: bool, *, on_done: Callable[[Any], None]) -> None:
        """A memory the turn taught: to the trash (Undo) or back from it (Restore)."""
        def work() -> Any:
            manager = self.services.manager()
            if trash:  # what it had replaced holds again (core.memory.replaced)
                return manager.delete(memory_id, reason="undone under the reply it was learned from")
            return manager.restore(memory_id, reason="restored under the reply it was learned from")
        self.runner.submit("db", work, on_done=on_done,
                           on_error=lambda exc: self.failed.emit(f"Could not change that memory: {exc}", False))

    def discard_if_empty(self, session_id: int, *, on_done: Callable[[bool], None]) -> None:
        """Remove a conversation no turn was stored in (its first message failed)."""
        self.runner.submit("db", lambda: discard_if_empty(self.services.db, session_id), on_done=on_done,
                           on_error=lambda exc: self.failed.emit(str(exc), False))

    def retry_without(self, request: TurnRequest, memory_id: int, episode_id: int | None) -> TurnRequest:
        """The same question without that memory, rewriting the stored reply (if there is one)."""
        return replace(request, exclude=tuple(sorted({*request.exclude, int(memory_id)})), replaces=episode_id,
                       regenerate=False)  # without a memory: what it rejects is the memory, not the reply's style

    # -- plumbing ------------------------------------------------------------------------------------

    def _assistant(self, lane: str) -> Any:
        """The assistant used on `lane`, built there on first use (and again after the model or its sampling
        changed in Models)."""
        engine = self.services.chat_engine()
        key = (engine, self.services.generation())
        built = self._assistants.get(lane)
        if built is None or built[0] != key:
            if lane == "model":
                assistant = self.services.assistant(db=self.services.learning_db,
                                                    structured=self.services.structured_model())
            else:
                assistant = self.services.assistant()
            built = self._assistants[lane] = (key, assistant)
        return built[1]

    def _assistant_now(self, lane: str) -> Any:
        return self._assistants[lane][1]

    def _fail(self, turn: _Turn, exc: BaseException) -> None:
        no_model = isinstance(exc, ModelError) and turn.prepared is None
        self.failed.emit(in_app_words(exc), no_model)
        self._end(turn)

    def _end(self, turn: _Turn) -> None:
        self._release(turn)
        if self._turn is turn:
            self._turn = None
            self.idle.emit()  # the panel sends a waiting message first (on the next loop turn), then we learn
            QTimer.singleShot(0, self.learn_when_quiet)

    @staticmethod
    def _release(turn: _Turn) -> None:
        gate, turn.gate = turn.gate, None
        if gate is not None:
            gate.chat_finished()

