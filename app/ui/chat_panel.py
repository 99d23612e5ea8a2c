"""Chat: conversations and streaming replies with Stop. A message sent while a reply streams waits its turn and
goes when that reply ends; a first message that fails leaves no empty conversation behind; a quiet line says what
the idle-time jobs (reflection, consolidation, forgetting) changed. Its rooms: the header (chat_header: title,
model picker, incognito, memory dial), what is done under a reply (chat_reply_actions), keeping the memories shown
in step with the store (chat_memory_watch), opening a conversation (chat_conversation), a failed turn
(chat_failures), a conversation's instructions (chat_instructions), editing a sent message (chat_edit). Every model
and store call runs on a lane (app/ui/chat_turn.py)."""
from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from app.ui.chat_conversation import FINISH_NOTES, ConversationMixin
from app.ui.chat_edit import Branches
from app.ui.chat_failures import FailureMixin
from app.ui.chat_header import ChatHeader
from app.ui.chat_instructions import InstructionsMixin
from app.ui.chat_learning import JobNotes
from app.ui.chat_memory_watch import MemoryWatch
from app.ui.chat_reply_actions import ReplyActions
from app.ui.chat_sessions import SessionList, title_from
from app.ui.chat_thread import MessageThread
from app.ui.chat_turn import TurnController, TurnRequest
from app.ui.chat_widgets import Composer, MessageWidget
from core.memory.conversation import earlier_turns
from core.store.text import MAX_TEXT_CHARS
from core.store.sessions import create_session

EMPTY_TEXT = ("Ask anything.\n\nEngram remembers what matters from your conversations; under each reply you see "
              "the memories and earlier conversations it recalled for it. Everything it keeps is in Memories, where "
              "you can change or forget it.")


class ChatPanel(ConversationMixin, FailureMixin, InstructionsMixin, QWidget):
    reply_finished = Signal(object)  # the MessageWidget of a reply that is stored (or not, in incognito)
    learned = Signal(object)  # the LearnReport after a turn was learned from

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.window_ = context.window
        self.session_id: int | None = None
        self.reply: MessageWidget | None = None  # the reply being written
        self.queued: list[MessageWidget] = []  # messages sent while a reply streams, shown and waiting their turn
        self._focus_episode: int | None = None  # the turn to show when the conversation being opened is shown
        self._starting = False  # a first message is creating its conversation: the next one waits too
        self._fresh_session: int | None = None  # made by the turn now running: removed again if that turn fails
        self._closed = False  # after shutdown, late results from the lanes change nothing
        self.turns = TurnController(self.services, self.runner, self, model_gate=self._model_gate,
                                    waiting=lambda: bool(self.queued) or self._starting)
        self.reply_actions = ReplyActions(  # under each reply: chips, veto, thumbs, regenerate, undo learning
            self.turns, self.window_, begin_reply=self._begin_reply, replies=self.replies,
            streaming=lambda: self.reply, starting=lambda: self._starting, memories_changed=self._memories_changed,
            open_turn=self.open_turn, parent=self)
        self.branches = Branches(self)  # edit a sent message, the earlier branch kept (‹ n/m ›)
        self._build()
        self._connect()
        QTimer.singleShot(0, self._first_load)  # once the event loop runs: the window shows before any query

    def _first_load(self) -> None:
        if self._closed:
            return
        try:
            self.sessions.reload()
            self.check_model()
            self.job_notes.start()
            self.memory_watch.start()
            self.turns.adopt_orphans()
        except RuntimeError:  # the lanes were shut down before the event loop ran: the window is closing
            self._closed = True

    # -- layout --------------------------------------------------------------------------------------

    def _build(self) -> None:
        self.header = ChatHeader(self.services, self.runner, self.window_)
        self.model, self.warmup = self.header.model, self.header.warmup
        self.model_button, self.banner, self.banner_text = self.model.button, self.model.banner, self.model.text
        self.models_button = self.model.models_button
        self.title, self.incognito, self.dial = self.header.title, self.header.incognito, self.header.dial
        self.instructions = ""  # this conversation's own instructions (its system prompt), as stored
        self.ask_instructions = self._ask_instructions  # replaced in tests
        self.header.instructions_button.clicked.connect(self.edit_instructions)
        self._show_instructions("")
        self.sessions = SessionList(self.services, self.runner)
        self.sessions.setMinimumWidth(200)
        splitter = QSplitter()
        splitter.addWidget(self.sessions)
        splitter.addWidget(self._conversation_side())
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([240, 760])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(splitter)

    def _conversation_side(self) -> QWidget:
        side = QWidget()
        layout = QVBoxLayout(side)
        layout.setContentsMargins(6, 0, 0, 0)
        layout.addWidget(self.header)
        layout.addWidget(self.banner)
        self.thread_view = MessageThread(EMPTY_TEXT)
        self.job_notes = JobNotes(self.services, self.runner, self)
        self.note = self.job_notes.label  # what the idle-time jobs changed, quietly
        self.job_notes.noted.connect(getattr(self.window_, "set_status", lambda _text: None))  # the status bar too
        self.memory_watch = MemoryWatch(self.services, self.runner, self.replies,
                                        getattr(self.window_, "memories_changed", None), self,
                                        store=getattr(self.window_, "store_watch", None))  # the window's one poll
        self.composer = Composer()
        self.composer_note = QLabel("")  # why the message in the box was not sent, right above it
        self.composer_note.setWordWrap(True)
        self.composer_note.setVisible(False)
        self.composer.textChanged.connect(lambda: self.composer_note.setVisible(False))
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        bottom = QHBoxLayout()
        bottom.addWidget(self.composer, 1)
        actions = QVBoxLayout()
        actions.addStretch(1)
        actions.addWidget(self.header.instructions_button)
        actions.addWidget(self.send_button)
        bottom.addLayout(actions)
        layout.addWidget(self.thread_view, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.composer_note)
        layout.addLayout(bottom)
        return side

    def _connect(self) -> None:
        self.composer.submitted.connect(self.send)
        self.send_button.clicked.connect(self._on_send_button)
        self.sessions.chosen.connect(self.open_session)
        self.sessions.new_requested.connect(self.new_conversation)
        self.incognito.toggled.connect(self.composer.set_incognito)
        self.turns.prepared.connect(self._on_prepared)
        self.turns.chunk.connect(self._on_chunk)
        self.turns.finished.connect(self._on_finished)
        self.turns.learned.connect(self._on_learned)
        self.turns.learning_state.connect(self._on_learning_state)
        self.turns.progress.connect(self._on_learning_progress)
        self.turns.failed.connect(self._on_failed)
        self.turns.idle.connect(self._on_idle)
        self.turns.pace.connect(lambda pace: self.reply.pace.setText(pace.words()) if self.reply else None)
        store = getattr(self.window_, "store_watch", None)
        if store is not None:  # another process (`engram chat`, a CLI command) changed the store
            store.moved.connect(self._store_moved)
        self.warmup.changed.connect(self._on_warmup_changed)
        self.warmup.failed.connect(self._on_warmup_failed)

    def _store_moved(self) -> None:
        """The list shows conversations held elsewhere too, and turns a closed process was learning are taken
        over at once (their claims name a process that is gone)."""
        if self._closed:
            return
        self.sessions.reload_quietly()
        self.turns.adopt_orphans()
        self.turns.learn_when_quiet()  # a job that had the model (Run now) may have ended

    def _model_gate(self) -> Any:
        background = getattr(self.window_, "background", None)  # the idle-time loop, when the app runs one
        return getattr(background, "model_gate", None)

    # -- the model (app/ui/chat_header.py) -----------------------------------------------------------

    def check_model(self) -> None:
        self.header.check_model()  # its name, the banner when there is none, the models to switch to

    def _waiting_words(self, request: TurnRequest) -> str:
        return self.warmup.waiting_text() or ("Thinking…" if request.dial == "off" else "Recalling…")

    def _on_warmup_changed(self) -> None:
        if self.reply is not None and self.reply.request is not None and self.turns.preparing:
            self.reply.set_status(self._waiting_words(self.reply.request))

    def _on_warmup_failed(self, what: str, message: str) -> None:
        if self.turns.busy or self._starting:
            return  # the waiting reply tries that load itself and says why it failed, under it
        if what == "chat":
            self.model.show_problem(message)
        else:
            self._notice(message)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self.model.show_name()  # Models or Settings may have chosen another
        if self.banner.isVisible():
            self.check_model()  # the user may have installed one meanwhile

    # -- conversations -------------------------------------------------------------------------------

    def new_conversation(self) -> None:
        if self.turns.busy:
            self.turns.stop()
        self._end_conversation()
        self.session_id = None
        self.sessions.select(None)
        self._clear_messages()
        self._show_instructions("")
        self.title.setText("New conversation")
        self.composer.setFocus()

    def focus_search(self) -> None:
        self.sessions.focus_search()

    # -- sending -------------------------------------------------------------------------------------

    def send(self, text: str) -> None:
        """Send a message; while a reply streams it is shown at once and waits for that reply to end."""
        text = text.strip()
        if not text:
            return
        if len(text) > MAX_TEXT_CHARS:  # refused here, before anything is posted: the text stays to shorten
            self.composer_note.setText(f"Too long to send: {len(text):,} characters, and a message can hold "
                                       f"{MAX_TEXT_CHARS:,}. Your text is still here to shorten; for a long document, "
                                       "add what matters in Memories.")
            self.composer_note.setVisible(True)
            return
        self.composer.clear()
        if self.turns.busy or self._starting or self.queued:
            waiting = self._add_message("user", text)
            waiting.set_pending(True)
            waiting.cancelled.connect(lambda w=waiting: self._take_back(w))
            self.queued.append(waiting)
            self._scroll_to_end()
            return
        self._submit(text)

    def _submit(self, text: str, shown: MessageWidget | None = None) -> None:
        if self.session_id is None and not self.incognito.isChecked():
            self._starting = True
            self._set_streaming(True)
            instructions = self.instructions
            self.runner.submit("db", lambda: create_session(self.services.db, title_from(text),
                                                            instructions=instructions),
                               on_done=lambda sid: self._start_in_new_session(sid, text, shown),
                               on_error=self._on_create_failed)
            return
        self._start(text, shown)

    def _on_create_failed(self, exc: BaseException) -> None:
        self._starting = False
        self._notice(str(exc))
        self._send_next()

    def _start_in_new_session(self, session_id: int, text: str, shown: MessageWidget | None) -> None:
        self._starting = False
        if self._closed:
            return
        self.session_id = self._fresh_session = session_id
        self.title.setText(title_from(text))
        self.sessions.reload(select=session_id)
        self.sessions.select(session_id)
        self._start(text, shown)

    def _start(self, text: str, shown: MessageWidget | None = None) -> None:
        if shown is None:
            shown = self._add_message("user", text)
        else:
            shown.set_pending(False)
        request = TurnRequest(self.session_id, text, incognito=self.incognito.isChecked(),
                              dial=self.dial.currentText())
        self._begin_reply(self._add_message("assistant", after=shown), request)

    def _take_back(self, waiting: MessageWidget) -> None:
        if waiting in self.queued:
            self.queued.remove(waiting)
            self.thread_view.remove(waiting)

    def _send_next(self) -> None:
        """The reply ended: the oldest waiting message goes now."""
        if self._closed or self.turns.busy or self._starting or not self.queued:
            return
        waiting = self.queued.pop(0)
        self._submit(waiting.text, waiting)

    def _begin_reply(self, reply: MessageWidget, request: TurnRequest) -> None:
        reply.request = request
        reply.set_text("")
        reply.set_status(self._waiting_words(request))
        self.reply = reply
        self.reply_actions.offer_regenerate()
        self._set_streaming(True)
        self.turns.start(request)
        self._scroll_to_end()

    def stop(self) -> None:
        self.turns.stop()

    def _on_send_button(self) -> None:
        if self.turns.busy:
            self.stop()
        else:
            self.send(self.composer.toPlainText())

    def _set_streaming(self, streaming: bool) -> None:
        self.send_button.setText("Stop" if streaming else "Send")
        self.send_button.setToolTip("Stop the reply (what was said so far is kept); a message you send meanwhile "
                                    "waits and goes when the reply ends" if streaming else "Send (Return)")

    def _on_idle(self) -> None:
        self._set_streaming(False)
        QTimer.singleShot(0, self._send_next)  # after the finished reply has been drawn

    # -- turn events ---------------------------------------------------------------------------------

    def _on_prepared(self, prepared: Any) -> None:
        if self.reply is not None:
            self.reply.set_used(getattr(prepared, "used", ()))
            self.reply.set_status("")
            self._show_earlier(self.reply, prepared)

    def _show_earlier(self, reply: MessageWidget, prepared: Any) -> None:
        """The earlier turns the reply quotes, read where and when they were said (the db lane is free now)."""
        ids, whys = getattr(prepared, "used_episodes", ()), getattr(prepared, "episode_whys", ())
        reply.earlier.set_turns([])  # an answer given again may quote none of what the first one did
        def show(found: list) -> None:
            if reply in self.replies():  # not when the user has moved to another conversation meanwhile
                reply.earlier.set_turns(found)
        if ids:
            self.runner.submit("db", earlier_turns, self.services.db, ids, whys, on_done=show)

    def _on_chunk(self, text: str) -> None:
        if self.reply is not None:
            self.reply.append(text)
            self._scroll_to_end()

    def _on_finished(self, record: Any, reason: str) -> None:
        reply, self.reply = self.reply, None
        if reply is None:
            return
        if getattr(record, "finish_reason", None) == "repetition":
            reason = "repetition"  # the reply went round before it ended: the store caught what the stream did not
        if reason in ("repetition", "echo") and getattr(record, "reply_text", None):
            reply.set_text(record.reply_text)  # as it is kept: the loop said once (core.loop_trim), trimmed
        reply.render_text()
        reply.set_episode(getattr(record, "episode_id", None))
        if getattr(record, "episode_id", None) is not None:  # stored: what it drew on is known (not incognito)
            reply.show_drew_on(getattr(record, "drew_on", ()))
            reply.earlier.show_drew_on(getattr(record, "drew_on_turns", ()))
        self.reply_actions.offer_regenerate()
        self._fresh_session = None  # a turn is stored in it: a real conversation now
        incognito = reply.request.incognito
        reply.set_status(" ".join(filter(None, [FINISH_NOTES.get(reason, ""),
                                                "Incognito: not stored." if incognito else ""])))
        if not incognito:
            self.sessions.reload()
            self.branches.stored(reply, record)
        self.reply_finished.emit(reply)

    def _reply_of(self, episode_id: int | None) -> MessageWidget | None:
        """The reply of this stored turn, if it is shown (the user may have moved to another conversation)."""
        return next((r for r in reversed(self.replies()) if episode_id is not None and r.episode_id == episode_id),
                    None)

    def _on_learning_state(self, episode_id: int | None, learning: bool) -> None:
        reply = self._reply_of(episode_id)
        if reply is not None and not self._closed:
            reply.set_learning(learning)

    def _on_learning_progress(self, note: Any) -> None:
        reply = self._reply_of(note.episode_id)
        if reply is not None and not self._closed:
            reply.show_learned(note)  # each fact the moment it is written; the turn is still being learned
            self._memories_changed()

    def _on_learned(self, report: Any, note: Any) -> None:
        if self._closed:
            return
        reply = self._reply_of(note.episode_id)
        if reply is not None:  # the user may have moved to another conversation meanwhile
            reply.show_learned(note)
            reply.add_drew_on(getattr(report, "drew_on", ()) or ())
        if report is None:
            return
        self.learned.emit(report)
        self._memories_changed()

    def _memories_changed(self) -> None:
        changed = getattr(self.window_, "memories_changed", None)
        if changed is not None:
            changed.emit()

    # -- helpers -------------------------------------------------------------------------------------

    def _add_message(self, role: str, text: str = "", after: MessageWidget | None = None) -> MessageWidget:
        message = MessageWidget(role, text)
        if role == "assistant":
            self.reply_actions.attach(message)
        else:
            self.branches.attach(message)
        self.thread_view.add(message, after)
        self.reply_actions.offer_regenerate()
        return message

    def message_widgets(self) -> list[MessageWidget]:
        return self.thread_view.widgets()

    def replies(self) -> Sequence[MessageWidget]:
        return [m for m in self.message_widgets() if m.role == "assistant"]

    def _clear_messages(self) -> None:
        self.reply = None
        self.queued = []  # waiting messages belong to the conversation being left
        self.thread_view.clear()

    def _scroll_to_end(self) -> None:
        self.thread_view.scroll_to_end()

    def _notice(self, text: str) -> None:
        self._set_streaming(self.turns.busy)
        if hasattr(self.window_, "set_status"):
            self.window_.set_status(text)

    def shutdown(self) -> None:
        self._closed = True
        self.warmup.stop()
        self.job_notes.stop()
        self.memory_watch.stop()
        self.turns.shutdown()
