"""What a person can do under a reply: open a memory it used, veto it (answer again without it), rate the reply,
answer the last message again, open or undo what the turn taught, answer the question a conflicting fact
raised, and have Engram try again to learn a turn it had stopped trying on. The panel hands each reply in (attach);
model and store work goes through the TurnController's lanes."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from PySide6.QtCore import QObject

from app.ui.chat_learning import LearnNote
from app.ui.chat_widgets import MessageWidget


class ReplyActions(QObject):
    def __init__(self, turns: Any, window: Any, *, begin_reply: Callable[[MessageWidget, Any], None],
                 replies: Callable[[], Sequence[MessageWidget]], streaming: Callable[[], MessageWidget | None],
                 starting: Callable[[], bool], memories_changed: Callable[[], None],
                 open_turn: Callable[[int, int], None] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.turns = turns
        self.window_ = window
        self.begin_reply = begin_reply  # (reply, request): answer again, in that reply's place
        self.replies = replies
        self.streaming = streaming  # the reply being written now, if any
        self.starting = starting  # a first message is creating its conversation
        self.memories_changed = memories_changed
        self.open_turn = open_turn  # (session id, episode id): an earlier turn a reply quoted, where it was said

    def attach(self, message: MessageWidget) -> None:
        message.memory_opened.connect(self.open_memory)
        message.memory_vetoed.connect(lambda mid, m=message: self.veto(m, mid))
        if self.open_turn is not None:
            message.earlier_opened.connect(self.open_turn)
        message.rated.connect(lambda rating, m=message: self.rate(m, rating))
        message.learned_undo.connect(lambda mid, trash, m=message: self.undo_learned(m, mid, trash))
        message.regenerate_requested.connect(lambda m=message: self.regenerate(m))
        message.question_opened.connect(lambda: self.window_.show_panel("hypotheses"))
        message.learning_retried.connect(lambda m=message: self.retry_learning(m))
        message.learning_skipped.connect(lambda m=message: self.skip_learning(m))

    def open_memory(self, memory_id: int) -> None:
        """Jump to the memory in the Memories panel."""
        self.window_.open_memory(memory_id)

    def veto(self, reply: MessageWidget, memory_id: int) -> None:
        """Answer again without this memory, and lower its weight for a stored reply."""
        if self.turns.busy:
            return
        request = self.turns.retry_without(reply.request, memory_id, reply.episode_id)
        self.turns.veto(reply.episode_id, memory_id, on_done=lambda _r: self.begin_reply(reply, request))

    def regenerate(self, reply: MessageWidget) -> None:
        """Answer the last message again; a stored reply is rewritten in place (nothing new is learned)."""
        if self.turns.busy or self.starting() or reply.request is None:
            return
        reply.keep_answer()  # the earlier answer stays one click away (‹ ›), as Jan and ChatGPT keep it
        self.begin_reply(reply, replace(reply.request, replaces=reply.episode_id, regenerate=True))

    def offer_regenerate(self) -> None:
        replies, streaming = self.replies(), self.streaming()
        for reply in replies:  # a reply that was never stored (its turn failed) is not offered: send it again
            answered = reply.episode_id is not None or (reply.request is not None and reply.request.incognito)
            reply.regenerate_button.setVisible(reply is replies[-1] and reply is not streaming and answered)

    def rate(self, reply: MessageWidget, rating: int | None) -> None:
        if reply.episode_id is not None:
            self.turns.rate(reply.episode_id, rating)

    def undo_learned(self, reply: MessageWidget, memory_id: int, trash: bool) -> None:
        """Undo under a reply: the memory that turn taught goes to the trash (Restore brings it back)."""
        def done(_memory: Any) -> None:
            row = reply.learned_row(memory_id)
            if row is not None:
                row.set_undone(trash)
            self.memories_changed()
        self.turns.undo_learned(memory_id, trash, on_done=done)

    def skip_learning(self, reply: MessageWidget) -> None:
        """Skip under a reply: its turn is not learned (or no further); what it taught so far stays."""
        if reply.episode_id is not None:
            self.turns.skip_learning(reply.episode_id)

    def retry_learning(self, reply: MessageWidget) -> None:
        """Try again under a reply whose learning Engram gave up: what it learns shows there when it ends."""
        if reply.episode_id is None:
            return
        def failed(exc: BaseException) -> None:  # learned meanwhile (the idle pass), or the store is gone
            reply.show_learned(LearnNote(reply.episode_id, problem=f"It could not be tried again: {exc}."))
        self.turns.retry_learning(reply.episode_id, on_error=failed)
