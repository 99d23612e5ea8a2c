"""Chat: conversations, streaming replies with Stop, the memories each reply used (open or veto), thumbs,
incognito and the memory dial. Every model and store call runs on a lane (app/ui/chat_turn.py)."""
from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea,
                               QSizePolicy, QSplitter, QVBoxLayout, QWidget)

from app.ui.chat_sessions import SessionList, title_from
from app.ui.chat_turn import TurnController, TurnRequest
from app.ui.chat_widgets import Composer, MessageWidget
from core.memory.conversation import load_conversation
from core.store.sessions import create_session, end_session

DIALS = ("off", "light", "normal", "eager")
EMPTY_TEXT = ("Ask anything.\n\nEngram remembers what matters from your conversations; under each reply you see "
              "the memories it used. Everything it keeps is in Memories, where you can change or forget it.")


class ChatPanel(QWidget):
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
        self._closed = False  # after shutdown, late results from the lanes change nothing
        self.turns = TurnController(self.services, self.runner, self, model_gate=self._model_gate)
        self._build()
        self._connect()
        QTimer.singleShot(0, self._first_load)  # once the event loop runs: the window shows before any query

    def _first_load(self) -> None:
        if self._closed:
            return
        try:
            self.sessions.reload()
            self.check_model()
        except RuntimeError:  # the lanes were shut down before the event loop ran: the window is closing
            self._closed = True

    # -- layout --------------------------------------------------------------------------------------

    def _build(self) -> None:
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
        layout.addLayout(self._top_bar())
        layout.addWidget(self._model_banner())
        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setAlignment(Qt.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setForegroundRole(QPalette.PlaceholderText)
        self.messages = QVBoxLayout()
        self.messages.setSpacing(8)
        holder = QWidget()
        outer = QVBoxLayout(holder)
        outer.addLayout(self.messages)
        outer.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.scroll.setWidget(holder)
        self.composer = Composer()
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        bottom = QHBoxLayout()
        bottom.addWidget(self.composer, 1)
        bottom.addWidget(self.send_button, 0, Qt.AlignBottom)
        layout.addWidget(self.empty, 1)
        layout.addWidget(self.scroll, 1)
        layout.addLayout(bottom)
        self.scroll.setVisible(False)
        return side

    def _top_bar(self) -> QHBoxLayout:
        self.title = QLabel("New conversation")
        self.title.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.title.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # a long title never widens the window
        self.incognito = QCheckBox("Incognito")
        self.incognito.setToolTip("Nothing from these messages is stored or learned")
        self.dial = QComboBox()
        self.dial.addItems(DIALS)
        self.dial.setCurrentText(self.services.settings.memory_dial if self.services.settings.memory_dial in DIALS
                                 else "normal")
        self.dial.setToolTip("How much Engram recalls for each reply: off uses no memories at all")
        bar = QHBoxLayout()
        bar.addWidget(self.title, 1)
        bar.addWidget(self.incognito)
        bar.addWidget(QLabel("Memory:"))
        bar.addWidget(self.dial)
        return bar

    def _model_banner(self) -> QFrame:
        self.banner = QFrame()
        self.banner.setFrameShape(QFrame.StyledPanel)
        self.banner_text = QLabel("")
        self.banner_text.setWordWrap(True)
        self.models_button = QPushButton("Open Models")
        self.models_button.clicked.connect(lambda: self.window_.show_panel("models"))
        row = QHBoxLayout(self.banner)
        row.addWidget(self.banner_text, 1)
        row.addWidget(self.models_button)
        self.banner.setVisible(False)
        return self.banner

    def _connect(self) -> None:
        self.composer.submitted.connect(self.send)
        self.send_button.clicked.connect(self._on_send_button)
        self.sessions.chosen.connect(self.open_session)
        self.sessions.new_requested.connect(self.new_conversation)
        self.incognito.toggled.connect(self._on_incognito)
        self.turns.prepared.connect(self._on_prepared)
        self.turns.chunk.connect(self._on_chunk)
        self.turns.finished.connect(self._on_finished)
        self.turns.learned.connect(self._on_learned)
        self.turns.failed.connect(self._on_failed)
        self.turns.idle.connect(lambda: self._set_streaming(False))

    def _model_gate(self) -> Any:
        background = getattr(self.window_, "background", None)  # the idle-time loop, when the app runs one
        return getattr(background, "model_gate", None)

    # -- the model -----------------------------------------------------------------------------------

    def check_model(self) -> None:
        """Show a clear way to the Models panel when no chat model is installed (checked off the GUI thread)."""
        if self.services.chat is not None:
            return
        ref = self.services.settings.chat_model
        self.runner.submit("io", lambda: self.services.model_store().resolve(ref),
                           on_done=lambda _path: self.banner.setVisible(False),
                           on_error=lambda exc: self._show_no_model(str(exc)))

    def _show_no_model(self, detail: str) -> None:
        text = ("No chat model is installed yet. Engram runs its model on this Mac: download one in Models, then "
                "come back here.")
        if self.services.settings.chat_model:  # one was chosen but cannot be used: say why
            text += f"\n({detail})"
        self.banner_text.setText(text)
        self.banner.setVisible(True)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
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
        self.title.setText("New conversation")
        self.composer.setFocus()

    def open_session(self, session_id: int | None) -> None:
        if session_id is None:
            self.new_conversation()
            return
        if self.turns.busy:
            self.turns.stop()
        if session_id != self.session_id:
            self._end_conversation()
        self.session_id = session_id
        self._clear_messages()
        self.runner.submit("db", lambda: load_conversation(self.services.db, session_id),
                           on_done=self._show_conversation, on_error=lambda exc: self._notice(str(exc)))

    def _end_conversation(self) -> None:
        """The user left this conversation: idle-time reflection may review it (a quiet one ends by itself)."""
        if self.session_id is not None:
            session_id = self.session_id
            self.runner.submit("db", lambda: end_session(self.services.db, session_id))

    def _show_conversation(self, conversation: Any) -> None:
        if conversation.session.id != self.session_id:
            return  # the user moved on while it loaded
        self.title.setText(conversation.session.title or "New conversation")
        for turn in conversation.turns:
            self._add_message("user", turn.user_text)
            reply = self._add_message("assistant", turn.assistant_text)
            reply.set_used(turn.used)
            reply.set_episode(turn.episode_id, turn.rating)
            reply.request = TurnRequest(self.session_id, turn.user_text, dial=self.dial.currentText())
        self._scroll_to_end()

    def focus_search(self) -> None:
        self.sessions.focus_search()

    # -- sending -------------------------------------------------------------------------------------

    def send(self, text: str) -> None:
        text = text.strip()
        if not text or self.turns.busy:
            return
        self.composer.clear()
        if self.session_id is None and not self.incognito.isChecked():
            self.runner.submit("db", lambda: create_session(self.services.db, title_from(text)),
                               on_done=lambda sid: self._start_in_new_session(sid, text),
                               on_error=lambda exc: self._notice(str(exc)))
            self._set_streaming(True)
            return
        self._start(text)

    def _start_in_new_session(self, session_id: int, text: str) -> None:
        self.session_id = session_id
        self.title.setText(title_from(text))
        self.sessions.reload(select=session_id)
        self.sessions.select(session_id)
        self._start(text)

    def _start(self, text: str) -> None:
        self._add_message("user", text)
        request = TurnRequest(self.session_id, text, incognito=self.incognito.isChecked(),
                              dial=self.dial.currentText())
        self._begin_reply(self._add_message("assistant"), request)

    def _begin_reply(self, reply: MessageWidget, request: TurnRequest) -> None:
        reply.request = request
        reply.set_text("")
        reply.set_status("Thinking…" if request.dial == "off" else "Recalling…")
        self.reply = reply
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
        self.send_button.setToolTip("Stop the reply (what was said so far is kept)" if streaming else "Send (Return)")

    # -- turn events ---------------------------------------------------------------------------------

    def _on_prepared(self, prepared: Any) -> None:
        if self.reply is not None:
            self.reply.set_used(getattr(prepared, "used", ()))
            self.reply.set_status("")

    def _on_chunk(self, text: str) -> None:
        if self.reply is not None:
            self.reply.append(text)
            self._scroll_to_end()

    def _on_finished(self, record: Any, reason: str) -> None:
        reply, self.reply = self.reply, None
        if reply is None:
            return
        reply.render()
        reply.set_episode(getattr(record, "episode_id", None))
        notes = {"cancelled": "Stopped.", "length": "Stopped at the length limit."}
        incognito = reply.request.incognito
        reply.set_status(" ".join(filter(None, [notes.get(reason, ""), "Incognito: not stored." if incognito else ""])))
        if not incognito:
            self.sessions.reload()
        self.reply_finished.emit(reply)

    def _on_learned(self, report: Any) -> None:
        if self._closed:
            return
        self.learned.emit(report)
        changed = getattr(self.window_, "memories_changed", None)
        if changed is not None:
            changed.emit()

    def _on_failed(self, message: str, no_model: bool) -> None:
        if no_model:
            self._show_no_model(message)
        target = self.reply
        if target is not None:
            target.set_status(message)
            if not target.text and no_model:
                target.set_text("_No reply: there is no chat model to answer with._")
        else:
            self._notice(message)

    # -- chips and thumbs ----------------------------------------------------------------------------

    def open_memory(self, memory_id: int) -> None:
        """Jump to the memory in the Memories panel."""
        self.window_.open_memory(memory_id)

    def veto(self, reply: MessageWidget, memory_id: int) -> None:
        """Answer again without this memory, and lower its weight for a stored reply."""
        if self.turns.busy:
            return
        request = self.turns.retry_without(reply.request, memory_id, reply.episode_id)
        self.turns.veto(reply.episode_id, memory_id, on_done=lambda _r: self._begin_reply(reply, request))

    def rate(self, reply: MessageWidget, rating: int | None) -> None:
        if reply.episode_id is not None:
            self.turns.rate(reply.episode_id, rating)

    # -- helpers -------------------------------------------------------------------------------------

    def _add_message(self, role: str, text: str = "") -> MessageWidget:
        message = MessageWidget(role, text)
        if role == "assistant":
            message.memory_opened.connect(self.open_memory)
            message.memory_vetoed.connect(lambda mid, m=message: self.veto(m, mid))
            message.rated.connect(lambda rating, m=message: self.rate(m, rating))
        self.messages.addWidget(message)
        self.empty.setVisible(False)
        self.scroll.setVisible(True)
        return message

    def message_widgets(self) -> list[MessageWidget]:
        return [self.messages.itemAt(i).widget() for i in range(self.messages.count())]

    def replies(self) -> Sequence[MessageWidget]:
        return [m for m in self.message_widgets() if m.role == "assistant"]

    def _clear_messages(self) -> None:
        self.reply = None
        while self.messages.count():
            widget = self.messages.takeAt(0).widget()
            if widget is not None:
                widget.deleteLater()
        self.empty.setVisible(True)
        self.scroll.setVisible(False)

    def _scroll_to_end(self) -> None:
        QTimer.singleShot(0, lambda: self.scroll.verticalScrollBar().setValue(
            self.scroll.verticalScrollBar().maximum()))

    def _notice(self, text: str) -> None:
        self._set_streaming(self.turns.busy)
        if hasattr(self.window_, "set_status"):
            self.window_.set_status(text)

    def _on_incognito(self, on: bool) -> None:
        self.composer.setPlaceholderText("Incognito: nothing you write here is stored or learned…" if on else
                                         "Message Engram…  (Return sends, Shift+Return for a new line)")

    def shutdown(self) -> None:
        self._closed = True
        self.turns.shutdown()
