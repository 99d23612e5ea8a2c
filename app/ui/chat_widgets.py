"""The chat panel's pieces: the composer, and a reply with its memory chips (app.ui.chat_chips), the earlier turns
it quoted (app.ui.chat_earlier) and thumbs; a reply's text is app.ui.chat_markdown's view, a message's Edit and
versions app.ui.chat_edit's."""
from __future__ import annotations

from typing import Any, Collection, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent, QPalette
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QSizePolicy, QToolButton, QVBoxLayout,
                               QWidget)

from app.ui.chat_chips import (DREW_ON_CAPTION, RECALLED_CAPTION, USED_CAPTION, MemoryChip, stored_drew_on,
                               unique_memories)
from app.ui.chat_earlier import EarlierRow
from app.ui.chat_edit import UserControls
from app.ui.chat_learning import LearnedRow, LearnNote
from app.ui.chat_markdown import MarkdownView, opens_from_a_reply, with_copy_links  # noqa: F401 - re-exported
from app.ui.flow_layout import FlowLayout, discard, empty_layout, layout_widgets

RENDER_MS = 60  # while a reply streams, Markdown is re-rendered at most this often (not once per token)


class Composer(QPlainTextEdit):
    """Return sends, Shift+Return starts a new line."""
    submitted = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.set_incognito(False)
        self.setTabChangesFocus(True)
        self.setFixedHeight(84)

    def set_incognito(self, on: bool) -> None:
        self.setPlaceholderText("Incognito: nothing you write here is stored or learned…" if on else
                                "Message Engram…  (Return sends, Shift+Return for a new line)")

    def keyPressEvent(self, event: QKeyEvent) -> None:
        sends = (event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
                 and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if not sends:
            super().keyPressEvent(event)
            return
        text = self.toPlainText().strip()
        if text:
            self.submitted.emit(text)


class MessageWidget(QFrame):
    """One message. A reply also shows the memories it used, what was learned from it, thumbs, and a status
    line; a message typed while a reply streams says it waits its turn."""
    memory_opened = Signal(int)
    memory_vetoed = Signal(int)
    earlier_opened = Signal(int, int)  # an earlier turn this reply quoted: its session id and episode id
    rated = Signal(object)  # +1, -1 or None
    learned_undo = Signal(int, bool)  # a memory learned from this turn: True to trash it, False to restore it
    regenerate_requested = Signal()
    cancelled = Signal()  # a waiting message taken back before it was sent
    question_opened = Signal()  # the question a conflicting fact raised, answered in Hypotheses
    learning_retried = Signal()  # Try again: learn this turn, which Engram had stopped trying to learn
    learning_skipped = Signal()  # Skip: don't learn from this turn (what it wrote so far stays, with Undo)

    def __init__(self, role: str, text: str = "") -> None:
        super().__init__()
        self.role = role
        self.text = text
        self.episode_id: int | None = None
        self.used: list[Any] = []
        self.drew_on: set[int] | None = None  # of `used`, what the reply drew on; None while not known
        self.request: Any = None  # the TurnRequest a reply answers (veto re-answers it)
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        self.setFrameShape(QFrame.Shape.StyledPanel if role == "user" else QFrame.Shape.NoFrame)
        if role == "user":
            self.setBackgroundRole(QPalette.ColorRole.AlternateBase)
            self.setAutoFillBackground(True)
        self.who = QLabel("You" if role == "user" else "Engram")
        self.who.setStyleSheet("font-weight: 600;")
        self.body = MarkdownView()
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_MS)
        self._render_timer.timeout.connect(self.render_text)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.who)
        layout.addWidget(self.body)
        if role == "assistant":
            self._add_reply_extras(layout)
        else:
            self._add_pending_row(layout)
        self.render_text()

    def _add_pending_row(self, layout: QVBoxLayout) -> None:
        self.pending_note = QLabel("Waiting: sends when this reply ends")
        self.pending_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Don't send")
        self.cancel_button.setAutoRaise(True)
        self.cancel_button.clicked.connect(self.cancelled)
        row = QHBoxLayout()
        row.addWidget(self.pending_note)
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.controls = UserControls(self)  # Edit, and ‹ n/m › between the message's versions (app/ui/chat_edit)
        layout.addWidget(self.controls)
        self.set_pending(False)

    def _add_reply_extras(self, layout: QVBoxLayout) -> None:
        self.chips_box = QWidget()
        self.chips = FlowLayout(self.chips_box)
        self.earlier = EarlierRow()
        self.earlier.opened.connect(self.earlier_opened)
        self.thumb_up, self.thumb_down = QToolButton(), QToolButton()
        for button, text, tip, value in ((self.thumb_up, "▲ Good", "Thumbs up: a good answer", 1),
                                         (self.thumb_down, "▼ Poor", "Thumbs down: a poor answer", -1)):
            button.setText(text)
            button.setToolTip(tip)
            button.setCheckable(True)
            button.setAutoRaise(True)
            button.setEnabled(False)
            button.clicked.connect(lambda checked, v=value: self._on_thumb(v, checked))
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy this reply (as Markdown)")
        self.copy_button.setAutoRaise(True)
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.text))
        self.regenerate_button = QToolButton()
        self.regenerate_button.setText("Regenerate")
        self.regenerate_button.setToolTip("Answer again; the new answer replaces this one")
        self.regenerate_button.setAutoRaise(True)
        self.regenerate_button.setVisible(False)  # only the last reply can be answered again
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.status = QLabel("")
        self.status.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.status.setWordWrap(True)  # a long error wraps beside the buttons instead of widening the thread
        # even a word longer than the row
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.earlier_answers: list[str] = []  # what this turn answered before Regenerate, oldest first
        self.shown_answer = -1  # which answer the body shows: -1 the latest, else an index of earlier_answers
        self.older_button, self.newer_button = QToolButton(), QToolButton()
        self.older_button.setText("‹")
        self.older_button.setToolTip("The answer before this one (Regenerate keeps them)")
        self.newer_button.setText("›")
        self.newer_button.setToolTip("The next answer")
        self.answer_count = QLabel("")
        self.answer_count.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.older_button.clicked.connect(lambda: self._step_answer(-1))
        self.newer_button.clicked.connect(lambda: self._step_answer(1))
        for widget in (self.older_button, self.newer_button):
            widget.setAutoRaise(True)
        for control in (self.older_button, self.answer_count, self.newer_button):
            control.setVisible(False)  # until the turn has been answered more than once
        self.pace = QLabel("")  # "0.84 s to first token · 12.3 tok/s · 48 tokens", quiet, as LM Studio shows it
        self.pace.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.pace.setToolTip("How fast this reply came: the wait for its first words, then tokens a second")
        footer = QHBoxLayout()
        for part in (self.older_button, self.answer_count, self.newer_button, self.thumb_up, self.thumb_down,
                     self.copy_button, self.regenerate_button):
            footer.addWidget(part)
        footer.addWidget(self.status, 1)
        footer.addWidget(self.pace)
        self.learned_box = QWidget()
        self.learned_list = QVBoxLayout(self.learned_box)
        self.learned_list.setContentsMargins(0, 0, 0, 0)
        self.learned_list.setSpacing(0)
        self.learned_note = QLabel("")
        self.learned_note.setWordWrap(True)
        self.learned_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.question_button = QToolButton()
        self.question_button.setText("Answer the question…")
        self.question_button.setAutoRaise(True)
        self.question_button.setStyleSheet("QToolButton { color: palette(link); }")
        self.question_button.clicked.connect(self.question_opened)
        self.retry_button = QToolButton()
        self.retry_button.setText("Try again")
        self.retry_button.setToolTip("Have Engram read this turn once more and learn what it says")
        self.retry_button.setAutoRaise(True)
        self.retry_button.setStyleSheet("QToolButton { color: palette(link); }")
        self.retry_button.clicked.connect(self._on_retry)
        self.learning_row = QWidget()  # "Learning from this…" while the turn waits or is being learned
        self.learning_label = QLabel("Learning from this…")
        self.learning_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.skip_learning_button = QToolButton()
        self.skip_learning_button.setText("Skip")
        self.skip_learning_button.setToolTip("Don't learn from this turn (what it already taught stays, with Undo)")
        self.skip_learning_button.setAutoRaise(True)
        self.skip_learning_button.setStyleSheet("QToolButton { color: palette(link); }")
        self.skip_learning_button.clicked.connect(self._on_skip_learning)
        learning = QHBoxLayout(self.learning_row)
        learning.setContentsMargins(0, 0, 0, 0)
        learning.addWidget(self.learning_label)
        learning.addWidget(self.skip_learning_button)
        learning.addStretch(1)
        self.learning_row.setVisible(False)
        self.question_button.setVisible(False)  # shown by show_learned when a fact waits for the user's answer
        self.retry_button.setVisible(False)  # ... and when Engram stopped trying to learn the turn
        self.learned_list.addWidget(self.learned_note)
        self.learned_list.addWidget(self.question_button)
        self.learned_list.addWidget(self.retry_button)
        self.learned_list.addWidget(self.learning_row)
        layout.addWidget(self.chips_box)
        layout.addWidget(self.earlier)
        layout.addWidget(self.learned_box)
        layout.addLayout(footer)
        self.chips_box.setVisible(False)
        self.learned_box.setVisible(False)

    # -- text ----------------------------------------------------------------------------------------

    def append(self, text: str) -> None:
        self.text += text
        if not self._render_timer.isActive():
            self._render_timer.start()

    def set_text(self, text: str) -> None:
        self.text = text
        self.render_text()

    def render_text(self) -> None:
        self._render_timer.stop()
        if self.role == "user":
            self.body.setPlainText(self.text)
        else:
            shown, self.body.code_blocks = with_copy_links(self.text or "…")
            self.body.setMarkdown(shown)

    # -- earlier answers (Regenerate keeps them one click away) ----------------------------------------

    def set_earlier_answers(self, answers: Sequence[str]) -> None:
        self.earlier_answers = [a for a in answers if a]
        self.shown_answer = -1
        self._show_answer()

    def keep_answer(self) -> None:
        """Regenerate: the answer shown now becomes the newest earlier one."""
        if self.text:
            self.earlier_answers.append(self.text)
        self.shown_answer = -1
        self._show_answer()

    def _step_answer(self, step: int) -> None:
        count = len(self.earlier_answers)
        position = (count if self.shown_answer < 0 else self.shown_answer) + step
        self.shown_answer = -1 if position >= count else max(0, position)
        self._show_answer()

    def _show_answer(self) -> None:
        count = len(self.earlier_answers) + 1
        position = count - 1 if self.shown_answer < 0 else self.shown_answer
        for widget in (self.older_button, self.answer_count, self.newer_button):
            widget.setVisible(count > 1)
        self.older_button.setEnabled(position > 0)
        self.newer_button.setEnabled(position < count - 1)
        self.answer_count.setText(f"{position + 1}/{count}")
        if self.shown_answer < 0:
            self.render_text()
        else:
            shown, self.body.code_blocks = with_copy_links(self.earlier_answers[self.shown_answer])
            self.body.setMarkdown(shown)

    # -- reply extras --------------------------------------------------------------------------------

    def set_used(self, used: Sequence[Any], drew_on: Collection[int] | None = None) -> None:
        """Chips for the memories in this reply's context (objects with id, text, why and maybe drew_on): the ones
        the reply drew on under "Drew on:", the others under "Also recalled:" — or all under "Recalled:" while
        that is not known (the reply is still being written, or it was stored before Engram told them apart)."""
        empty_layout(self.chips)
        self.used = unique_memories(used)
        drawn = self.drew_on = stored_drew_on(self.used) if drew_on is None else {int(i) for i in drew_on}
        groups = [(USED_CAPTION, self.used, "")] if drawn is None else [
            (DREW_ON_CAPTION, [m for m in self.used if int(m.id) in drawn], "This reply drew on it."),
            (RECALLED_CAPTION, [m for m in self.used if int(m.id) not in drawn],
             "Recalled for this reply, which did not draw on it.")]
        for caption, memories, note in groups:
            if memories:
                label = QLabel(caption)
                label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
                self.chips.addWidget(label)
            for memory in memories:
                self._add_chip(memory, note)
        self.chips_box.setVisible(bool(self.used))

    def show_drew_on(self, drew_on: Collection[int]) -> None:
        """The reply is stored: sort its chips by what it drew on."""
        self.set_used(self.used, drew_on)

    def add_drew_on(self, more: Collection[int]) -> None:
        """Learning found the reply drew on these too, in other words (the usefulness rating)."""
        if self.drew_on is not None and not {int(i) for i in more} <= self.drew_on:
            self.set_used(self.used, self.drew_on | {int(i) for i in more})

    def _add_chip(self, memory: Any, note: str) -> None:
        chip = MemoryChip(int(memory.id), str(memory.text), str(getattr(memory, "why", "") or ""), note)
        chip.opened.connect(self.memory_opened)
        chip.vetoed.connect(self.memory_vetoed)
        self.chips.addWidget(chip)

    def chip_widgets(self) -> list[MemoryChip]:
        return [w for w in layout_widgets(self.chips) if isinstance(w, MemoryChip)]

    def show_learned(self, note: LearnNote) -> None:
        """What was learned from this turn ("Remembered: …", each with Undo), or why nothing was."""
        for row in self.learned_rows():
            self.learned_list.removeWidget(row)
            discard(row)
        for fact in note.facts:
            row = LearnedRow(fact)
            row.opened.connect(self.memory_opened)
            row.undo_requested.connect(self.learned_undo)
            self.learned_list.insertWidget(self.learned_list.indexOf(self.learned_note), row)
            row.setVisible(True)  # now, not on the next loop turn: the box may be shown already ("Learning…")
        skipped = "Skipped: Engram did not learn from this." if note.skipped and not note.facts else (
            "Skipped: Engram learned nothing more from this." if note.skipped else "")
        words = " ".join(filter(None, (note.problem, note.asked, skipped)))
        self.learned_note.setText(words)
        self.learned_note.setVisible(bool(words))
        self.question_button.setVisible(bool(note.asked))
        self.retry_button.setVisible(note.retry)
        self._show_learned_box()

    def set_learning(self, learning: bool, words: str = "Learning from this…") -> None:
        """The turn waits to be learned or is being learned: said under the reply, with Skip."""
        self.learning_label.setText(words)
        self.learning_row.setVisible(learning)
        self.skip_learning_button.setEnabled(True)
        self._show_learned_box()

    def _show_learned_box(self) -> None:
        self.learned_box.setVisible(bool(self.learned_rows()) or bool(self.learned_note.text())
                                    or not self.learning_row.isHidden())

    def _on_skip_learning(self) -> None:
        self.skip_learning_button.setEnabled(False)  # one click: the learner gives way at its next token
        self.learning_label.setText("Skipping…")
        self.learning_skipped.emit()

    def _on_retry(self) -> None:
        self.retry_button.setVisible(False)  # one click is one more try
        self.learned_note.setText("Trying again to learn from this…")
        self.learning_retried.emit()

    def learned_rows(self) -> list[LearnedRow]:
        return [w for w in layout_widgets(self.learned_list) if isinstance(w, LearnedRow)]

    def learned_row(self, memory_id: int) -> LearnedRow | None:
        return next((r for r in self.learned_rows() if r.memory_id == memory_id), None)

    def set_pending(self, pending: bool) -> None:
        """A message typed while a reply streams: shown at once, sent when that reply ends."""
        self.pending_note.setVisible(pending)
        self.cancel_button.setVisible(pending)

    def set_episode(self, episode_id: int | None, rating: int | None = None) -> None:
        """Thumbs work once the turn is stored (never in incognito, where nothing is)."""
        self.episode_id = episode_id
        for button in (self.thumb_up, self.thumb_down):
            button.setEnabled(episode_id is not None)
        self.show_rating(rating)

    def show_rating(self, rating: int | None) -> None:
        self.thumb_up.setChecked(rating == 1)
        self.thumb_down.setChecked(rating == -1)

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def _on_thumb(self, value: int, checked: bool) -> None:
        rating = value if checked else None
        self.show_rating(rating)
        self.rated.emit(rating)
