"""When a turn fails in the chat panel: the reason under the reply, the message back in the box when no model could
answer (nothing was kept), and no empty conversation left behind by a first message that failed. A part of
app/ui/chat_panel.py."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from app.ui.chat_widgets import MessageWidget

if TYPE_CHECKING:
    from app.ui.chat_model import ModelNotice
    from app.ui.chat_sessions import SessionList
    from app.ui.chat_turn import TurnController
    from app.ui.chat_widgets import Composer
    from app.ui.panel_widgets import ElidedLabel


class FailureMixin:
    # ChatPanel's parts these methods use (app/ui/chat_panel.py makes them), declared for the type checker
    session_id: int | None
    _fresh_session: int | None
    _closed: bool
    reply: MessageWidget | None
    model: ModelNotice
    composer: Composer
    title: ElidedLabel
    sessions: SessionList
    turns: TurnController
    _notice: Callable[[str], None]

    def _on_failed(self, message: str, no_model: bool) -> None:
        if no_model:
            self.model.show_missing(message)
        target = self.reply
        if no_model and target is not None and self._give_back(target):
            message += " Your message is back in the box below, to send once a model is ready."
        if target is not None:
            target.set_status(message)
            if not target.text:  # "…" would read as still thinking; the reason is in the status line
                target.set_text("_No reply: there is no chat model to answer with._" if no_model else "_No reply._")
        else:
            self._notice(message)
        if self._fresh_session is not None:  # set only until the conversation's first turn is stored
            self._discard_fresh_session()

    def _give_back(self, reply: MessageWidget) -> bool:
        """Nothing could answer, so nothing was kept: the message goes back into an empty composer."""
        request = getattr(reply, "request", None)
        if (request is None or request.replaces is not None or getattr(request, "edits", None) is not None
                or self.composer.toPlainText().strip()):
            return False
        self.composer.setPlainText(request.text)
        return True

    def _discard_fresh_session(self) -> None:
        """The first message of a new conversation failed: no empty conversation is left in the list."""
        session_id, self._fresh_session = self._fresh_session, None
        if session_id is None:
            return

        def done(removed: bool) -> None:
            if not removed or self._closed:
                return
            if self.session_id == session_id:
                self.session_id = None
                self.title.setText("New conversation")
            self.sessions.drop(session_id)
        self.turns.discard_if_empty(session_id, on_done=done)
