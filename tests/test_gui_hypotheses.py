"""The Hypotheses panel against a real store: confirm, reject and reword claims; evidence opens its episodes."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.store import goals, hypotheses  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402


@pytest.fixture
def seeded(tmp_path):
    services = Services.from_data_dir(tmp_path / "home")
    db = services.db
    talks = [add_episode(db, "Can you keep it short? I only have a minute."),
             add_episode(db, "Just the answer please, no essay."),
             add_episode(db, "I went climbing again this weekend.")]
    brief = hypotheses.add_hypothesis(db, "style", "Prefers short, direct answers", 0.75, talks[:2])
    climber = hypotheses.add_hypothesis(db, "interests", "Enjoys rock climbing", 0.45, talks[2:])
    goals.open_goal(db, "Which climbing gym do you go to?", reason="mentioned climbing twice")
    answered = goals.open_goal(db, "Do you prefer metric units?")
    goals.close_goal(db, answered, "yes, metric")
    yield services, brief, climber, talks
    services.close()


@pytest.fixture
def panel(qtbot, seeded):
    services = seeded[0]
    window = MainWindow(services)
    qtbot.addWidget(window)
    panel = window.show_panel("hypotheses")
    qtbot.waitUntil(lambda: len(panel.view.hypotheses) == 2, timeout=5000)
    yield panel
    window.runner.shutdown(wait=True)


def _act(qtbot, panel, action):
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        action()


def test_claims_are_grouped_by_dimension_with_goals(panel):
    groups = [panel.tree.topLevelItem(i).text(0) for i in range(panel.tree.topLevelItemCount())]
    assert groups == ["Interests", "Style"]
    assert panel.open_goals.topLevelItemCount() == 1
    assert panel.closed_goals.topLevelItem(0).text(3) == "yes, metric"
    assert not panel.empty.isVisible()


def test_search_filters_claims(panel):
    panel.focus_search()
    panel.search.setText("climb")
    assert [panel.tree.topLevelItem(i).text(0) for i in range(panel.tree.topLevelItemCount())] == ["Interests"]
    panel.search.setText("")
    assert panel.tree.topLevelItemCount() == 2


def test_confirm_and_reject_from_the_panel(qtbot, panel, seeded):
    services, brief, climber, _ = seeded
    assert panel.select_hypothesis(brief)
    assert panel.confirm_button.isEnabled()
    _act(qtbot, panel, panel.on_confirm)
    confirmed = on_db_lane(panel, hypotheses.get_hypothesis, brief)
    assert confirmed.status == "confirmed" and confirmed.decided_at is not None
    assert panel.select_hypothesis(climber)
    _act(qtbot, panel, panel.on_reject)
    assert on_db_lane(panel, hypotheses.get_hypothesis, climber).status == "rejected"
    _act(qtbot, panel, lambda: panel.status.setCurrentText("rejected"))
    assert [h.id for h in panel.view.hypotheses] == [climber]


def test_evidence_link_opens_the_conversation(qtbot, panel, seeded):
    _, brief, _, talks = seeded
    assert panel.select_hypothesis(brief)
    qtbot.waitUntil(lambda: "episode:" in panel.detail.toHtml(), timeout=5000)
    with qtbot.waitSignal(panel.episode_shown, timeout=5000) as shown:
        panel.open_episode(talks[1])
    assert shown.args == [talks[1]]
    assert "no essay" in panel.detail.toPlainText()


def test_edit_rewords_the_claim(qtbot, panel, seeded):
    services, brief, _, _ = seeded
    assert panel.select_hypothesis(brief)
    panel.ask_text = lambda title, current: "Prefers answers of one or two sentences"
    _act(qtbot, panel, panel.on_edit)
    assert on_db_lane(panel, hypotheses.get_hypothesis, brief).claim == "Prefers answers of one or two sentences"


def test_ready_to_confirm_and_answering_a_goal(qtbot, panel, seeded):
    statuses = {panel.tree.topLevelItem(i).child(0).text(0): panel.tree.topLevelItem(i).child(0).text(2)
                for i in range(panel.tree.topLevelItemCount())}
    assert statuses == {"Prefers short, direct answers": "open · ready to confirm", "Enjoys rock climbing": "open"}
    panel.open_goals.setCurrentItem(panel.open_goals.topLevelItem(0))
    assert panel.answer_button.isEnabled()
    panel.ask_text = lambda title, current: "Movement RiNo"
    _act(qtbot, panel, panel.on_answer)
    assert on_db_lane(panel, lambda db: goals.list_goals(db, status="open")) == []
    assert panel.closed_goals.topLevelItemCount() == 2


def test_empty_store_shows_the_hint(qtbot, tmp_path):
    services = Services.from_data_dir(tmp_path / "empty")
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("hypotheses")
    qtbot.waitSignal(panel.loaded, timeout=5000).wait()  # queued delivery: it cannot have fired yet
    assert panel.empty.isVisible()
    assert panel.tree.topLevelItemCount() == 0
    window.runner.shutdown(wait=True)


def test_a_claim_formed_while_idle_shows_when_the_panel_is_shown_again(qtbot, panel, seeded):
    """Reflection writes hypotheses on the idle-time loop's own connection; the panel re-reads when shown."""
    services, talks = seeded[0], seeded[3]
    window = panel.context.window
    window.show()
    window.show_panel("hypotheses")
    window.show_panel("chat")
    other = open_db(services.db_path)
    hypotheses.add_hypothesis(other, "interests", "Plays the cello", 0.5, talks[:1])
    other.close()
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        window.show_panel("hypotheses")
    assert "Plays the cello" in [h.claim for h in panel.view.hypotheses]


def test_a_conflict_question_is_settled_with_one_click(qtbot, panel, seeded):
    from core.memory.reconcile import conflict_of
    from core.store.memories import add_memory, get_memory, set_flag, trash_memory

    def conflict(db):  # as reconcile leaves it: the pinned fact, and the new one waiting in the trash
        boston = add_memory(db, "The user lives in Boston.")
        set_flag(db, boston, "pinned", True)
        denver = add_memory(db, "The user lives in Denver.")
        trash_memory(db, denver, reason="waiting for your answer")
        goal = goals.open_goal(db, 'You told me "The user lives in Denver." ... Which one is true now?',
                               reason="reconcile: contradiction of a pinned memory", memory_ids=[boston, denver])
        assert conflict_of(goals.get_goal(db, goal)) == (boston, denver)
        return goal, boston, denver
    goal, boston, denver = on_db_lane(panel, conflict)
    _act(qtbot, panel, panel.reload)
    rows = [panel.open_goals.topLevelItem(i) for i in range(panel.open_goals.topLevelItemCount())]
    panel.open_goals.setCurrentItem(next(r for r in rows if r.text(0).startswith("You told me")))
    assert panel.keep_new_button.isVisibleTo(panel) and panel.keep_old_button.isVisibleTo(panel)
    _act(qtbot, panel, lambda: panel.keep_new_button.click())
    assert "replaces the old one" in panel.message.text()
    new, old = on_db_lane(panel, lambda db: (get_memory(db, denver), get_memory(db, boston)))
    assert new.is_active and new.pinned and old.superseded_by == denver
    panel.open_goals.setCurrentItem(panel.open_goals.topLevelItem(0))  # an ordinary question: no such buttons
    assert not panel.keep_new_button.isVisibleTo(panel)
