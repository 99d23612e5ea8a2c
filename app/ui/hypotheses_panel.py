"""Hypotheses and learning goals: what Engram believes about its user, by dimension, with the evidence.

Claims show a confidence bar and links to the conversations that support them; the user confirms, rejects or
rewords a claim. Open and closed learning goals (questions Engram wants to ask) are listed below.
Every read and write runs on the database lane.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QInputDialog, QLabel,
                               QLineEdit, QPushButton, QSplitter, QTabWidget, QTextBrowser, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from app.ui.panel_widgets import BAR_ROLE, FractionBarDelegate, ReloadOnShow, empty_state, heading, when
from core.memory.reconcile import conflict_of, resolve_conflict
from core.store import goals, hypotheses
from core.store.episodes import get_episodes
from core.types import Episode, Hypothesis, LearningGoal

STATUS_FILTERS = ("all", "open", "confirmed", "rejected")
COLUMNS = ("Claim", "Confidence", "Status", "Evidence")
ID_ROLE = Qt.ItemDataRole.UserRole + 1
CONFLICT_ROLE = Qt.ItemDataRole.UserRole + 2  # a goal that asks which of two conflicting memories holds


@dataclass(frozen=True)
class HypothesesView:
    """One read of the store: the claims (filtered by status) and every learning goal."""
    hypotheses: list[Hypothesis]
    open_goals: list[LearningGoal]
    closed_goals: list[LearningGoal]


def load_view(db: Any, status: str | None) -> HypothesesView:
    return HypothesesView(hypotheses.list_hypotheses(db, status=status),
                          goals.list_goals(db, status="open"), goals.list_goals(db, status="closed"))


def by_dimension(items: Sequence[Hypothesis]) -> dict[str, list[Hypothesis]]:
    grouped: dict[str, list[Hypothesis]] = {}
    for item in items:
        grouped.setdefault(item.dimension, []).append(item)
    return dict(sorted(grouped.items()))


def detail_html(item: Hypothesis, episodes: dict[int, Episode]) -> str:
    """The claim, its state and each evidence episode as a link that opens it."""
    rows = [f"<h3>{html.escape(item.claim)}</h3>",
            f"<p>{html.escape(item.dimension)} · {item.status} · confidence {item.confidence:.0%}</p>",
            f"<p>First noticed {when(item.created_at)}; last changed {when(item.updated_at)}"
            + (f"; decided {when(item.decided_at)}" if item.decided_at else "") + "</p>",
            "<h4>Evidence</h4>"]
    if not item.evidence_episode_ids:
        rows.append("<p>No conversations linked.</p>")
    rows.append("<ul>")
    for episode_id in item.evidence_episode_ids:
        episode = episodes.get(episode_id)
        text = html.escape(episode.user_text[:140]) if episode else "(purged)"
        rows.append(f'<li><a href="episode:{episode_id}">#{episode_id}</a> '
                    f'{when(episode.created_at) if episode else ""}: {text}</li>')
    rows.append("</ul>")
    return "".join(rows)


def episode_html(episode: Episode) -> str:
    reply = f"<p><b>Engram:</b> {html.escape(episode.assistant_text)}</p>" if episode.assistant_text else ""
    return (f"<h4>Conversation #{episode.id} · {when(episode.created_at)}</h4>"
            f"<p><b>You:</b> {html.escape(episode.user_text)}</p>{reply}")


class HypothesesPanel(ReloadOnShow, QWidget):
    loaded = Signal()  # after each reload, for tests
    episode_shown = Signal(int)

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.ask_text: Callable[[str, str], str | None] = self._ask_text  # replaced in tests
        self.view = HypothesesView([], [], [])
        self.selected: Hypothesis | None = None
        self._build()
        self.reload()

    # --- layout -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.status = QComboBox()
        self.status.addItems(STATUS_FILTERS)
        self.status.currentTextChanged.connect(lambda _text: self.reload())
        top = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search claims")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _text: self._show(self.view))
        top.addWidget(heading("What Engram guesses about you"))  # About you (Memories) says what it knows
        top.addStretch(1)
        self.reflect_button = QPushButton("Reflect now")
        self.reflect_button.setToolTip("Review your conversations now for new hypotheses (it learns from any "
                                       "message still waiting first), instead of waiting until you are away")
        self.reflect_button.clicked.connect(self.reflect_now)
        top.addWidget(self.reflect_button)
        top.addWidget(self.search, 1)
        top.addWidget(self.status)
        self.tree = self._tree()
        self.detail = QTextBrowser()
        self.detail.setOpenLinks(False)
        self.detail.anchorClicked.connect(self._on_link)
        self.detail.setPlaceholderText("Select a claim to see why Engram thinks so.")
        self.empty = empty_state("No hypotheses yet. Engram forms them while you are away, from what you talk "
                                 "about; each needs evidence from several conversations.")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.tree)
        split.addWidget(self.detail)
        split.setSizes([640, 380])
        self.goals = QTabWidget()
        self.open_goals, self.closed_goals = self._goal_list(), self._goal_list()
        self.goals.addTab(self.open_goals, "Open questions")
        self.goals.addTab(self.closed_goals, "Answered")
        self.goals.setMaximumHeight(190)
        self.open_goals.itemSelectionChanged.connect(self._on_goal_selected)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.empty)
        layout.addWidget(split, 1)
        layout.addLayout(self._actions())
        layout.addWidget(heading("Learning goals"))
        layout.addWidget(self.goals)
        self.message = QLabel("")
        layout.addWidget(self.message)

    def _tree(self) -> QTreeWidget:
        tree = QTreeWidget()
        tree.setColumnCount(len(COLUMNS))
        tree.setHeaderLabels(COLUMNS)
        tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        tree.setItemDelegateForColumn(1, FractionBarDelegate(tree))
        tree.header().setStretchLastSection(False)
        tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # the claim gets the room the figures leave
        tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        tree.setColumnWidth(1, 130)
        tree.setAlternatingRowColors(True)
        tree.currentItemChanged.connect(self._on_current)
        return tree

    def _goal_list(self) -> QTreeWidget:
        tree = QTreeWidget()
        tree.setHeaderLabels(("Question", "Why", "Opened", "Answer"))
        tree.setRootIsDecorated(False)
        tree.header().setStretchLastSection(False)
        # The texts share the width (a long reason or answer squeezed the question to 30 px when it alone
        # stretched); each is elided, whole in its tooltip. The date takes what it needs.
        stretch, fit = QHeaderView.ResizeMode.Stretch, QHeaderView.ResizeMode.ResizeToContents
        for column, mode in enumerate((stretch, stretch, fit, stretch)):
            tree.header().setSectionResizeMode(column, mode)
        return tree

    def _actions(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.confirm_button = QPushButton("Confirm")
        self.reject_button = QPushButton("Reject")
        self.edit_button = QPushButton("Edit…")
        self.reopen_button = QPushButton("Undecide")
        self.answer_button = QPushButton("Answer question…")
        self.answer_button.setToolTip("Answer the selected learning goal: it is closed with your answer")
        self.answer_button.setEnabled(False)
        self.answer_button.clicked.connect(self.on_answer)
        # a conflict with a pinned or protected memory: one click says which fact holds now
        self.keep_new_button = QPushButton("Use the new fact")
        self.keep_old_button = QPushButton("Keep what I had")
        for button, keep in ((self.keep_new_button, "new"), (self.keep_old_button, "old")):
            button.setVisible(False)
            button.clicked.connect(lambda _=False, keep=keep: self.resolve_selected_conflict(keep))
        handlers = ((self.confirm_button, self.on_confirm), (self.reject_button, self.on_reject),
                    (self.edit_button, self.on_edit), (self.reopen_button, self.on_reopen))
        for button, handler in handlers:
            button.setEnabled(False)
            button.clicked.connect(handler)
            row.addWidget(button)
        row.addStretch(1)
        for button in (self.keep_new_button, self.keep_old_button, self.answer_button):
            row.addWidget(button)
        return row

    def reflect_now(self) -> None:
        """Reflection started now through the Jobs panel's Run now (the same queue, the same message); the
        hypotheses are read again when it ends."""
        jobs = self.context.window.panel("jobs")
        if jobs is None:
            return
        if not getattr(self, "_watching_jobs", False):
            jobs.job_finished.connect(self._reflected)
            self._watching_jobs = True
        jobs.run_now("reflection", told=self.message.setText)

    def _reflected(self, job: Any) -> None:
        if getattr(job, "kind", "") == "reflection":
            self.message.setText(f"Reflection finished: {job.message}" if job.message else "Reflection finished.")
            self.reload()

    # --- reading ----------------------------------------------------------------------------------------
    def reload(self) -> None:
        status = self.status.currentText()
        self._read(lambda db: load_view(db, None if status == "all" else status), self._show)

    def _show(self, view: HypothesesView) -> None:
        keep = self.selected.id if self.selected else None
        self.view = view
        self.tree.clear()
        needle = self.search.text().strip().lower()
        shown = [h for h in view.hypotheses if needle in f"{h.dimension} {h.claim}".lower()]
        for dimension, items in by_dimension(shown).items():
            group = QTreeWidgetItem([dimension.capitalize(), "", "", ""])
            group.setFirstColumnSpanned(True)
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(group)
            for item in items:
                group.addChild(self._row(item))
            group.setExpanded(True)
        self.empty.setVisible(not view.hypotheses)
        self._fill_goals(self.open_goals, view.open_goals)
        self._fill_goals(self.closed_goals, view.closed_goals)
        self.goals.setTabText(0, f"Open questions ({len(view.open_goals)})")
        self.goals.setTabText(1, f"Answered ({len(view.closed_goals)})")
        if keep is None or not self.select_hypothesis(keep):
            self._set_selected(None)
        self.loaded.emit()

    def _row(self, item: Hypothesis) -> QTreeWidgetItem:
        ready = item.status == "open" and item.confidence >= self.services.settings.reflection.confirm_threshold
        status = "open · ready to confirm" if ready else item.status
        row = QTreeWidgetItem([item.claim, f"{item.confidence:.0%}", status, str(len(item.evidence_episode_ids))])
        row.setData(0, ID_ROLE, item.id)
        row.setData(1, BAR_ROLE, item.confidence)
        row.setToolTip(0, item.claim)
        return row

    def _fill_goals(self, tree: QTreeWidget, items: Sequence[LearningGoal]) -> None:
        tree.clear()
        for goal in items:
            row = QTreeWidgetItem([goal.question, goal.reason, when(goal.created_at), goal.answer])
            row.setData(0, ID_ROLE, goal.id)
            row.setData(0, CONFLICT_ROLE, conflict_of(goal) is not None)
            for column, text in ((0, goal.question), (1, goal.reason), (3, goal.answer)):
                row.setToolTip(column, text)
            tree.addTopLevelItem(row)

    def select_hypothesis(self, hypothesis_id: int) -> bool:
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            children = [group.child(j) for j in range(group.childCount())] if group is not None else []
            for child in children:
                if child is not None and child.data(0, ID_ROLE) == hypothesis_id:
                    self.tree.setCurrentItem(child)
                    return True
        return False

    def _on_current(self, current: QTreeWidgetItem | None, _previous: Any = None) -> None:
        hypothesis_id = current.data(0, ID_ROLE) if current is not None else None
        self._set_selected(next((h for h in self.view.hypotheses if h.id == hypothesis_id), None))

    def _set_selected(self, item: Hypothesis | None) -> None:
        self.selected = item
        self.confirm_button.setEnabled(item is not None and item.status != "confirmed")
        self.reject_button.setEnabled(item is not None and item.status != "rejected")
        self.edit_button.setEnabled(item is not None)
        self.reopen_button.setEnabled(item is not None and item.status != "open")
        if item is None:
            self.detail.clear()
            return
        ids = list(item.evidence_episode_ids)
        self._read(lambda db: get_episodes(db, ids), lambda found: self._show_detail(item, found))

    def _show_detail(self, item: Hypothesis, episodes: dict[int, Episode]) -> None:
        if self.selected is not None and self.selected.id == item.id:
            self.detail.setHtml(detail_html(item, episodes))

    def _on_link(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("episode:"):
            self.open_episode(int(text.split(":", 1)[1]))

    def open_episode(self, episode_id: int) -> None:
        """Show the evidence conversation under the claim."""
        def shown(found: dict[int, Episode]) -> None:
            episode = found.get(episode_id)
            body = episode_html(episode) if episode else f"<p>Conversation #{episode_id} was purged.</p>"
            base = detail_html(self.selected, {}) if self.selected else ""
            self.detail.setHtml(base + "<hr>" + body)
            self.episode_shown.emit(episode_id)
        self._read(lambda db: get_episodes(db, [episode_id]), shown)

    # --- decisions --------------------------------------------------------------------------------------
    def on_confirm(self) -> None:
        self._decide("confirmed")

    def on_reject(self) -> None:
        self._decide("rejected")

    def on_reopen(self) -> None:
        self._decide("open")

    def _decide(self, status: str) -> None:
        if self.selected is None:
            return
        hypothesis_id = self.selected.id
        self._write(lambda db: hypotheses.decide(db, hypothesis_id, status), f"Marked {status}.")

    def on_edit(self) -> None:
        if self.selected is None:
            return
        text = self.ask_text("Edit the claim", self.selected.claim)
        if text is None or text.strip() == self.selected.claim:
            return
        self.edit_claim(self.selected.id, text)

    def edit_claim(self, hypothesis_id: int, claim: str) -> None:
        self._write(lambda db: hypotheses.edit_hypothesis(db, hypothesis_id, claim=claim), "Claim updated.")

    def _read(self, work: Callable[[Any], Any], then: Callable[[Any], None]) -> None:
        """work(db) on the database lane (which also opens the store the first time), then(result) here."""
        self.runner.submit("db", lambda: work(self.services.db), on_done=then, on_error=self._failed)

    def on_answer(self) -> None:
        items = self.open_goals.selectedItems()
        if not items:
            return
        goal_id = items[0].data(0, ID_ROLE)
        answer = self.ask_text("Answer Engram's question", "")
        if answer is not None and answer.strip():
            self.answer_goal(goal_id, answer)

    def answer_goal(self, goal_id: int, answer: str) -> None:
        self._write(lambda db: goals.close_goal(db, goal_id, answer), "Thanks: the question is answered.")

    def _on_goal_selected(self) -> None:
        items = self.open_goals.selectedItems()
        conflict = bool(items) and bool(items[0].data(0, CONFLICT_ROLE))
        self.answer_button.setEnabled(bool(items))
        self.keep_new_button.setVisible(conflict)
        self.keep_old_button.setVisible(conflict)

    def resolve_selected_conflict(self, keep: str) -> None:
        items = self.open_goals.selectedItems()
        if items:
            goal_id = items[0].data(0, ID_ROLE)
            done = ("Done: the new fact replaces the old one, which stays in its history." if keep == "new"
                    else "Done: what you had stays; the new fact is in the trash.")
            self._write(lambda db: resolve_conflict(db, goal_id, keep), done)

    def _write(self, work: Callable[[Any], Any], done_text: str) -> None:
        def finished(_result: Any) -> None:
            self.message.setText(done_text)
            self.reload()
        self._read(work, finished)

    def _failed(self, exc: BaseException) -> None:
        self.message.setText(f"Could not do that: {exc}")

    def _ask_text(self, title: str, current: str) -> str | None:
        text, ok = QInputDialog.getMultiLineText(self, title, "", current)
        return text if ok else None

    def focus_search(self) -> None:
        self.search.setFocus()
