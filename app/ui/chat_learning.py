"""What Engram learned from a turn, shown under the reply ("Remembered: You play the cello" with Undo, said to you
as About you says it: core.second_person), why it could not learn (and whether Engram tries again later or has
stopped trying: then the note offers Try again), and the quiet note an idle-time job leaves (reflection,
consolidation, forgetting) once it has finished.

The words come from what the turn already returned (core.assistant.LearnReport: reconcile outcomes and errors),
from the store's record of a turn given up (core.store.turn_learning) and from the finished job's own progress
message; nothing here recomputes them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from app.ui.plain_text import button_text
from core.second_person import to_second_person
from core.store import turn_learning
from core.store.jobs import list_jobs
from core.words import counted

KEPT = ("new", "contradiction")  # a row that did not exist before the turn: Undo may trash it
CHANGED = ("update",)  # an older memory reworded by the turn: shown, not undone (that would trash the old one)
JOB_KINDS = ("reflection", "consolidation", "forgetting")
JOB_POLL_MS = 3000  # how often to look for learning jobs that finished (one small query on the db lane)
ROW_CHARS = 90  # a learned statement longer than this is elided (the tooltip has it whole)


@dataclass(frozen=True)
class LearnedFact:
    memory_id: int
    statement: str
    undoable: bool
    replaces: str = ""  # the statement of the memory it closed ("I moved to Porto" closed "lives in Lisbon")


@dataclass(frozen=True)
class LearnNote:
    """What to show under a stored reply once learning from it ended."""
    episode_id: Optional[int]
    facts: tuple[LearnedFact, ...] = ()
    problem: str = ""  # why nothing (or not everything) was learned, in the user's words
    asked: str = ""  # a fact that contradicts a pinned or protected memory waits for the user's answer
    retry: bool = False  # Engram stopped trying to learn this turn: the note offers Try again
    skipped: bool = False  # the user chose Skip: nothing more is learned from this turn


def learned_ids(report: Any) -> list[int]:
    """The memories a turn wrote or reworded (reconcile outcomes), in order, each once, then those it closed."""
    ids = [o.memory_id for o in getattr(report, "outcomes", ()) if o.decision in KEPT + CHANGED and o.memory_id]
    return list(dict.fromkeys([*(int(i) for i in ids), *replaced(report).values()]))


def replaced(report: Any) -> dict[int, int]:
    """new memory → the one it closed, for each fact of the turn that replaced a stored one."""
    return {int(o.memory_id): int(o.target_id) for o in getattr(report, "outcomes", ())
            if o.decision == "contradiction" and o.memory_id and o.target_id}


def learn_note(episode_id: Optional[int], report: Any, statements: Mapping[int, str]) -> LearnNote:
    """The note for a LearnReport; `statements` are the learned (and closed) memories' texts as stored now."""
    undoable = {int(o.memory_id) for o in report.outcomes if o.decision in KEPT and o.memory_id}
    closed = replaced(report)
    kept = [o.memory_id for o in report.outcomes if o.decision in KEPT + CHANGED and o.memory_id]
    facts = tuple(LearnedFact(i, statements[i], i in undoable, statements.get(closed.get(i, 0), ""))
                  for i in dict.fromkeys(int(m) for m in kept) if i in statements)
    problem = plain_problem(report.errors[0]) if report.errors and not facts else ""
    if report.errors and facts:
        problem = "Some of it could not be learned."
    asked = sum(1 for o in report.outcomes if o.decision == "asked")
    question = ("This conflicts with a memory you pinned or protected: Engram asks which one is true now."
                if asked else "")
    return LearnNote(episode_id, facts, problem, question)


def with_taught(note: LearnNote, taught: Sequence[Any]) -> LearnNote:
    """The note with the facts the turn taught in an earlier try (it gave way to a reply half-way, and the
    resumed learning skipped what was stored): every fact the turn taught stays under it."""
    shown = {f.memory_id for f in note.facts}
    earlier = tuple(LearnedFact(t.memory_id, t.statement, True, t.replaces) for t in taught
                    if t.memory_id not in shown and not t.deleted)
    return replace(note, facts=earlier + note.facts) if earlier else note


PROBLEMS = (  # (words found in the technical message, what a person is told); "fit" alone would match "benefit"
    (("context window", "too long", "tokens but"), "the conversation was too long for the model to read "
                                                          "in one go"),
    (("ran out of tokens", "not valid json", "does not match the schema", "schema"),
     "the model's notes about it came out garbled"),
    (("no chat model", "not installed", "could not be found", "no model"), "there is no chat model to read it with"),
    (("busy", "locked"), "the memory file was busy"),
    (("disk", "space", "permission", "read-only"), "the memory file could not be written"),
    (("insufficient memory", "out of memory", "memoryerror", "cannot allocate"),
     "the computer ran out of memory while reading it"),
)


def plain_reason(message: str) -> str:
    """Why learning failed, without exception names or commands: the user can act on it or let it be."""
    lowered = message.lower()
    return next((said for words, said in PROBLEMS if any(w in lowered for w in words)),
                "something went wrong while reading it")


def plain_problem(message: str) -> str:
    return f"Nothing was learned from this: {plain_reason(message)}. You can add what matters yourself in Memories."


def failure_note(episode_id: Optional[int], message: str, gave_up: bool) -> LearnNote:
    """Learning raised: the store waits before trying the turn again, or gave up after MAX_ATTEMPTS tries."""
    if gave_up:
        return LearnNote(episode_id, problem=f"Nothing was learned from this: {plain_reason(message)}. Engram tried "
                                             f"{turn_learning.MAX_ATTEMPTS} times and stopped trying.", retry=True)
    return LearnNote(episode_id, problem=f"Nothing was learned from this yet: {plain_reason(message)}. Engram will "
                                         "try again later.")


def given_up_notes(db: Any, episode_ids: Sequence[Optional[int]]) -> dict[int, LearnNote]:
    """The notes of the turns among `episode_ids` that Engram stopped trying to learn (a conversation reopened)."""
    wanted = [int(i) for i in episode_ids if i is not None]
    return {g.episode_id: failure_note(g.episode_id, g.last_error, True)
            for g in (turn_learning.given_up(db, wanted) if wanted else [])}


# -- the quiet note of a finished idle-time job ------------------------------------------------------------

def _numbers(pattern: str, message: str) -> Optional[tuple[int, ...]]:
    found = re.search(pattern, message or "")
    return tuple(int(g) for g in found.groups()) if found else None


def job_note(job: Any) -> Optional[str]:
    """One sentence for a finished job, or None when it changed nothing worth a word (or is not a learning job)."""
    if job.kind not in JOB_KINDS or job.state != "done":
        return None
    message = job.message or ""
    if job.kind == "reflection":
        found = _numbers(r"(\d+) new(?: hypothes[ie]s)?, (\d+) strengthened", message)
        return None if not found or not any(found) else (
            f"Reflected on your last conversation: {counted(found[0], 'new hypothesis')}, "
            f"{found[1]} strengthened.")
    if job.kind == "consolidation":
        found = _numbers(r"(\d+) summar(?:y|ies), (\d+) similarity edges?, (\d+) made permanent", message)
        return None if not found or not any(found) else (
            f"Tidied your memories: {counted(found[0], 'summary')}, "
            f"{counted(found[1], 'new link')}, {found[2]} made permanent.")
    found = _numbers(r"archived (\d+) facts?, compacted (\d+) turns?", message)
    return None if not found or not any(found) else (
        f"Let go of {counted(found[0], 'unused memory')} and summarised "
        f"{counted(found[1], 'old turn')}; you can restore them in Memories.")


def newest_notes(jobs: Iterable[Any], since: float) -> tuple[float, list[str]]:
    """(the newest finish time seen, the notes of jobs finished after `since`, oldest first)."""
    fresh = sorted((j for j in jobs if (j.finished_at or 0.0) > since), key=lambda j: j.finished_at)
    latest = max([since] + [j.finished_at for j in fresh])
    return latest, [n for n in (job_note(j) for j in fresh) if n]


class JobNotes(QObject):
    """Looks every few seconds for learning jobs that finished (in the app's idle-time loop, from the Jobs panel
    or from the command line: all finish in the store) and shows the newest one's note in `label`."""
    noted = Signal(str)

    def __init__(self, services: Any, runner: Any, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.seen_until: Optional[float] = None  # finish time of the newest job already noted
        self.timer = QTimer(self)
        self.timer.setInterval(JOB_POLL_MS)
        self.timer.timeout.connect(self.poll)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.label.setVisible(False)

    def start(self) -> None:
        self.poll()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def poll(self) -> None:
        def read(db: Any) -> tuple[float, list]:
            return db.now(), list_jobs(db, states=("done",), limit=20)
        try:
            self.runner.submit("db", lambda: read(self.services.db), on_done=self._on_jobs)
        except RuntimeError:  # the lanes are shut down: the window is closing
            self.timer.stop()

    def _on_jobs(self, result: tuple[float, list]) -> None:
        now, jobs = result
        if self.seen_until is None:  # what finished before the chat opened is old news
            self.seen_until = now
            return
        self.seen_until, notes = newest_notes(jobs, self.seen_until)
        if notes and self.timer.isActive():
            self.label.setText(notes[-1])
            self.label.setVisible(True)
            self.noted.emit(notes[-1])


# -- the row under a reply ---------------------------------------------------------------------------------

class LearnedRow(QWidget):
    """"Remembered: <statement>" — the statement opens the memory; Undo moves it to the trash, Restore brings it
    back."""
    opened = Signal(int)
    undo_requested = Signal(int, bool)  # the memory, and True to trash it (False: restore it)

    def __init__(self, fact: LearnedFact) -> None:
        super().__init__()
        self.memory_id = fact.memory_id
        self.undoable = fact.undoable
        self.undone = False
        self.caption = QLabel(self._kept_caption())
        self.caption.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.open_button = QToolButton()
        self.set_statement(fact.statement)
        self.instead = QLabel(_instead_of(fact.replaces))  # what it closed: Undo brings that back
        self.instead.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.instead.setTextFormat(Qt.TextFormat.PlainText)
        self.instead.setVisible(bool(fact.replaces))
        self.open_button.setAutoRaise(True)
        self.open_button.clicked.connect(lambda: self.opened.emit(self.memory_id))
        self.undo_button = QToolButton()
        self.undo_button.setText("Undo")
        self.undo_button.setAutoRaise(True)
        self.undo_button.setToolTip("Don't keep this: move it to the trash (you can restore it)")
        self.undo_button.clicked.connect(lambda: self.undo_requested.emit(self.memory_id, not self.undone))
        self.undo_button.setVisible(fact.undoable)
        for button in (self.open_button, self.undo_button):  # they read as links: one click does it
            button.setStyleSheet("QToolButton { color: palette(link); }")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        row.addWidget(self.caption)
        row.addWidget(self.open_button)
        row.addWidget(self.instead)
        row.addWidget(self.undo_button)
        row.addStretch(1)

    def _kept_caption(self) -> str:
        return "Remembered:" if self.undoable else "Updated:"

    def set_statement(self, statement: str) -> None:
        """Said to you, as About you says it ("You play the cello" for the stored "User plays the cello"): display
        only, the memory keeps its words."""
        shown = to_second_person(statement)
        text = " ".join(shown.split())
        self.open_button.setText(button_text(text if len(text) <= ROW_CHARS else text[: ROW_CHARS - 1] + "…"))
        self.open_button.setToolTip(f"{shown}\n\nOpen this memory in Memories")

    def set_undone(self, undone: bool, caption: str = "Not remembered:") -> None:
        self.undone = undone
        self.caption.setText(caption if undone else self._kept_caption())
        self.undo_button.setText("Restore" if undone else "Undo")
        self.undo_button.setToolTip("Bring it back from the trash" if undone else
                                    "Don't keep this: move it to the trash (you can restore it)")
        self.undo_button.setVisible(undone or self.undoable)  # a reworded older memory is never trashed from here

    def show_memory(self, shown: Any) -> None:
        """The memory as stored now (app/ui/chat_memory_watch.ShownMemory), after a change made elsewhere; None
        once it was purged for good (nothing left to open or restore)."""
        if shown is None:
            self.undone = True
            self.caption.setText("Deleted for good:")
            self.open_button.setEnabled(False)
            self.undo_button.setVisible(False)
            return
        self.set_statement(shown.statement)
        if shown.deleted != self.undone:
            self.set_undone(shown.deleted, "Deleted:")


def _instead_of(statement: str) -> str:
    """"instead of “You live in Lisbon.”", said to you and kept short."""
    if not statement:
        return ""
    text = " ".join(to_second_person(statement).split())
    return f"instead of “{text if len(text) <= ROW_CHARS // 2 else text[: ROW_CHARS // 2 - 1] + '…'}”"
