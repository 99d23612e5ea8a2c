"""Opening a conversation in the chat panel: its turns read on the db lane and shown with what each one taught
(with Undo), why its reply stopped, the memories it used, its earlier answers and its message's versions; turns
still waiting to be learned are learned again when the chat is quiet. A part of app/ui/chat_panel.py."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from app.ui.chat_learning import LearnedFact, LearnNote, given_up_notes
from app.ui.chat_turn import TurnRequest
from app.ui.chat_widgets import MessageWidget
from core.memory.conversation import load_conversation
from core.store import turn_learning
from core.store.sessions import end_session

if TYPE_CHECKING:
    from PySide6.QtWidgets import QComboBox

    from app.ui.chat_reply_actions import ReplyActions
    from app.ui.chat_sessions import SessionList
    from app.ui.chat_thread import MessageThread
    from app.ui.chat_turn import TurnController
    from app.ui.panel_widgets import ElidedLabel

FINISH_NOTES = {"cancelled": "Stopped.", "length": "Stopped at the length limit.",
                "repetition": "Stopped: the model was repeating itself.",
                "echo": "Stopped: the model began writing out its notes instead of answering."}


class ConversationMixin:
    # ChatPanel's parts these methods use (app/ui/chat_panel.py makes them), declared for the type checker
    services: Any
    runner: Any
    session_id: int | None
    _focus_episode: int | None
    turns: TurnController
    title: ElidedLabel
    dial: QComboBox
    sessions: SessionList
    reply_actions: ReplyActions
    thread_view: MessageThread
    new_conversation: Callable[[], None]
    _add_message: Callable[..., MessageWidget]
    _clear_messages: Callable[[], None]
    _notice: Callable[[str], None]
    _scroll_to_end: Callable[[], None]
    _show_instructions: Callable[[str], None]

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
        def load(db: Any) -> tuple[Any, dict[int, Any]]:
            conversation = load_conversation(db, session_id)
            return conversation, given_up_notes(db, [t.episode_id for t in conversation.turns])
        self.runner.submit("db", load, self.services.db, on_done=self._show_conversation,
                           on_error=lambda exc: self._notice(str(exc)))

    def _end_conversation(self) -> None:
        """The user left this conversation: idle-time reflection may review it (a quiet one ends by itself)."""
        if self.session_id is not None:
            session_id = self.session_id
            self.runner.submit("db", lambda: end_session(self.services.db, session_id))

    def _show_conversation(self, loaded: tuple[Any, dict[int, Any]]) -> None:
        conversation, given_up = loaded  # and the notes of turns Engram stopped trying to learn
        if conversation.session.id != self.session_id:
            return  # the user moved on while it loaded
        self.title.setText(conversation.session.title or "New conversation")
        self._show_instructions(conversation.session.instructions)
        focus, self._focus_episode, shown = self._focus_episode, None, None
        for turn in conversation.turns:
            asked = self._add_message("user", turn.user_text)
            asked.controls.set_turn(turn.episode_id, turn.version)
            shown = asked if turn.episode_id == focus else shown
            reply = self._add_message("assistant", turn.assistant_text)
            reply.set_used(turn.used)
            reply.set_earlier_answers(turn.earlier_replies)
            reply.earlier.set_turns(turn.earlier)
            reply.set_episode(turn.episode_id, turn.rating)
            reply.request = TurnRequest(self.session_id, turn.user_text, dial=self.dial.currentText())
            self._show_turn_learning(reply, turn, given_up.get(turn.episode_id))
        self.turns.resume_learning([t.episode_id for t in conversation.turns if t.learning == turn_learning.PENDING])
        self.reply_actions.offer_regenerate()
        if shown is not None:
            self.thread_view.reveal(shown)
        else:
            self._scroll_to_end()

    @staticmethod
    def _show_turn_learning(reply: MessageWidget, turn: Any, given_up: Any) -> None:
        """What the turn taught (with Undo, or Restore once undone), why its reply stopped, and whether it is still
        to be learned: the turn's own, shown whenever its conversation is."""
        facts = tuple(LearnedFact(f.memory_id, f.statement, True, f.replaces) for f in turn.taught)
        note = given_up or LearnNote(turn.episode_id)
        reply.show_learned(replace(note, facts=facts, skipped=turn.learning == turn_learning.SKIPPED))
        for fact in turn.taught:
            row = reply.learned_row(fact.memory_id) if fact.deleted else None
            if row is not None:  # shown just above, from the same facts
                row.set_undone(True)
        reply.set_status(FINISH_NOTES.get(turn.finish_reason or "", ""))
        reply.set_learning(turn.learning == turn_learning.PENDING)

    def open_turn(self, session_id: int, episode_id: int) -> None:
        """An earlier turn a reply quoted: its conversation opens at that turn."""
        self._focus_episode = episode_id
        self.sessions.select(session_id)
        self.open_session(session_id)
