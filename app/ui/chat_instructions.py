"""A conversation's own instructions (its system prompt): "Instructions…" beside Send, stored with the conversation,
given to the model as the user's instructions, not as data. A part of the chat panel (app/ui/chat_panel.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from core.store.sessions import set_instructions

if TYPE_CHECKING:
    from app.ui.chat_header import ChatHeader


class InstructionsMixin:
    # ChatPanel's parts these methods use (app/ui/chat_panel.py makes them), declared for the type checker
    services: Any
    runner: Any
    session_id: int | None
    instructions: str
    header: ChatHeader
    ask_instructions: Callable[[str], tuple[str, bool]]  # the dialog; a test puts its answer here
    _notice: Callable[[str], None]

    def _ask_instructions(self, current: str) -> tuple[str, bool]:
        from PySide6.QtWidgets import QInputDialog
        return QInputDialog.getMultiLineText(self,  # type: ignore[arg-type]  # the ChatPanel it is part of: a QWidget
                                             "Instructions for this conversation",
                                             "How Engram should answer here (e.g. “Answer in Portuguese.”):",
                                             current)

    def edit_instructions(self) -> None:
        text, ok = self.ask_instructions(self.instructions)
        if not ok:
            return
        text = text.strip()
        if self.session_id is None:  # saved with the conversation its first message makes
            self._show_instructions(text)
            return
        session_id = self.session_id
        self.runner.submit("db", set_instructions, self.services.db, session_id, text,
                           on_done=lambda _s: self._show_instructions(text) if self.session_id == session_id
                           else None, on_error=lambda exc: self._notice(f"Could not save the instructions: {exc}"))

    def _show_instructions(self, text: str) -> None:
        self.instructions = text
        button = self.header.instructions_button
        button.setText("Instructions ✓" if text else "Instructions…")
        button.setToolTip(f"This conversation's instructions:\n{text}" if text else
                          "Give this conversation its own instructions (a system prompt), e.g. a language or a tone")
