"""The Forgetting timeline against a real store: curves and the threshold line from core.memory.forget, a past
forgetting restored from the panel, and an item pinned from the plot."""
from __future__ import annotations

import time

import pytest

pytest.importorskip("pytestqt")

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.memory import forget  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.memories import add_memory, get_memory  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402

DAY = 86400.0


@pytest.fixture
def seeded(tmp_path):
    """Memories written 200, 25 and 12 days ago (through a clock set back), then one real forgetting pass."""
    services = Services.from_data_dir(tmp_path / "home")
    services.db  # noqa: B018 - reading the property opens the store; create the store and its folder
    ids = {}
    for days_ago, statements in ((200, ["User once asked about a parking app", "User tried a sourdough recipe"]),
                                 (25, ["User's phone is a Pixel 6"]),
                                 (12, ["User is reading Middlemarch", "User likes hiking in the Alps"])):
        back = open_db(services.db_path, clock=lambda d=days_ago: time.time() - d * DAY)
        for statement in statements:
            ids[statement] = add_memory(back, statement, importance=0.05)
        back.close()
    result = forget.forgetting_pass(services.db, services.settings)
    yield services, ids, result
    services.close()


@pytest.fixture
def panel(qtbot, seeded):
    window = MainWindow(seeded[0])
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("timeline")
    qtbot.waitUntil(lambda: bool(panel.view.days), timeout=10000)
    yield panel
    window.runner.shutdown(wait=True)


def _act(qtbot, panel, action):
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        action()


def test_curves_threshold_and_past_events(panel, seeded):
    services, ids, result = seeded
    old = {ids["User once asked about a parking app"], ids["User tried a sourdough recipe"]}
    assert old <= set(result.archived)  # the real pass forgot the 200-day-old facts
    view = panel.view
    assert view.threshold == pytest.approx(forget.threshold(services.settings))
    assert len(view.curves) >= 2 and len(panel.curve_items) == len(view.curves)
    for curve in view.curves:
        assert len(curve.values) == len(view.days)
        assert all(a >= b - 1e-9 for a, b in zip(curve.values, curve.values[1:]))  # fading without use
    assert panel.plot.isVisible() and not panel.plot_empty.isVisible()
    assert {p.event.item_id for p in view.past} == set(result.archived)
    assert all("below" in p.event.reason for p in view.past)
    assert panel.past.rowCount() == len(view.past)
    upcoming = view.upcoming
    assert upcoming and panel.upcoming.rowCount() == len(upcoming)
    assert view.due_now == len(on_db_lane(panel, forget.preview, services.settings)) == 0  # the pass just ran


def test_what_a_pass_would_take_now_is_shown_as_due(qtbot, panel, seeded):
    services = seeded[0]
    back = open_db(services.db_path, clock=lambda: time.time() - 400 * DAY)
    stale = add_memory(back, "User once owned a red bicycle", importance=0.0)
    back.close()
    _act(qtbot, panel, panel.reload)
    assert panel.view.due_now == 1 == len(on_db_lane(panel, forget.preview, services.settings))
    row = next(r for r in range(panel.upcoming.rowCount()) if panel.upcoming.item(r, 0).text().endswith("bicycle"))
    assert panel.upcoming.item(row, 3).text() == "at the next forgetting pass"
    assert panel.select_item(f"memory:{stale}") and panel.pin_button.isEnabled()


def test_restore_a_past_forgetting(qtbot, panel, seeded):
    services, ids, _ = seeded
    sourdough = ids["User tried a sourdough recipe"]
    assert on_db_lane(panel, get_memory, sourdough).status == "forgotten"
    event = next(p.event for p in panel.view.past if p.event.item_id == sourdough)
    assert panel.select_event(event.id) and panel.restore_button.isEnabled()
    _act(qtbot, panel, panel.on_restore)
    assert on_db_lane(panel, get_memory, sourdough).status == "active"
    assert on_db_lane(panel, forget.get_event, event.id).restored_at is not None
    assert panel.select_event(event.id) and not panel.restore_button.isEnabled()
    assert panel.past.item(panel.past.currentRow(), 6).text() != ""


def _click_curve(qtbot, panel, curve):
    """A real mouse click on the plot, at a point on the curve."""
    from PySide6.QtCore import QPointF, Qt
    n = 1  # near today, where the curves of items of different ages are far apart
    scene = panel.plot.getViewBox().mapViewToScene(QPointF(panel.view.days[n], curve.values[n]))
    pixel = panel.plot.mapFromScene(scene)
    qtbot.mouseClick(panel.plot.viewport(), Qt.LeftButton, pos=pixel)


def test_pin_from_the_plot_takes_the_item_out_of_forgetting(qtbot, panel, seeded):
    services, ids, _ = seeded
    phone = ids["User's phone is a Pixel 6"]
    curve = next(c for c in panel.view.curves if c.item_id == phone)
    _click_curve(qtbot, panel, curve)
    assert panel.selected is not None and panel.selected.key == curve.key and panel.pin_button.isEnabled()
    _act(qtbot, panel, panel.on_pin)
    assert on_db_lane(panel, get_memory, curve.item_id).pinned
    assert curve.key not in {c.key for c in panel.view.curves}


def test_empty_store_shows_the_hint(qtbot, tmp_path):
    services = Services.from_data_dir(tmp_path / "empty")
    services.db  # noqa: B018 - reading the property creates the store
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("timeline")
    qtbot.waitSignal(panel.loaded, timeout=10000).wait()
    assert panel.plot_empty.isVisible() and not panel.plot.isVisible()
    assert panel.past.rowCount() == 0
    window.runner.shutdown(wait=True)
    services.close()


def test_a_first_week_says_when_forgetting_can_begin(qtbot, tmp_path):
    """Nothing younger than min_age_days is ever forgotten, so a new user's timeline has no curve: it says from when
    their memories will be weighed (the oldest's day + 7), not only that nothing is old enough."""
    from app.ui.timeline_state import EMPTY
    from core.memory.retention import too_young
    from core.store.memories import set_flag
    services = Services.from_data_dir(tmp_path / "new")
    services.db  # noqa: B018 - reading the property creates the store
    for days_ago, statement in ((2, "User plays the cello"), (1, "User's sister lives in Porto"), (3, "Pinned one")):
        back = open_db(services.db_path, clock=lambda d=days_ago: time.time() - d * DAY)
        memory = add_memory(back, statement)
        if statement == "Pinned one":
            set_flag(back, memory, "pinned", True)  # never forgotten: not counted
        back.close()
    young = too_young(services.db, services.settings)
    assert young.count == 2 and abs(young.first_at - (time.time() + 5 * DAY)) < 60
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("timeline")
    qtbot.waitSignal(panel.loaded, timeout=10000).wait()
    day = time.localtime(young.first_at)
    assert panel.plot_empty.isVisible() and panel.plot_empty.text() != EMPTY
    assert f"2 memories and turns will be weighed from {day.tm_mday} {time.strftime('%B', day)}" in \
        panel.plot_empty.text()
    window.runner.shutdown(wait=True)
    services.close()


def test_plots_follow_a_dark_palette(qtbot):
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from app.ui.panel_widgets import accent, is_dark, themed_plot
    app = QApplication.instance()
    light = app.palette()
    dark = QPalette(light)
    for role, colour in ((QPalette.Window, QColor(32, 32, 34)), (QPalette.Base, QColor(22, 22, 24)),
                         (QPalette.Text, QColor(235, 235, 235))):
        dark.setColor(role, colour)
    app.setPalette(dark)
    try:
        plot = themed_plot()
        qtbot.addWidget(plot)
        assert is_dark()
        assert plot.backgroundBrush().color() == QColor(22, 22, 24)
        assert plot.getAxis("left").textPen().color() == QColor(235, 235, 235)
        assert accent(0).lightness() > QColor(22, 22, 24).lightness() + 100
    finally:
        app.setPalette(light)
    assert not is_dark()


@pytest.mark.parametrize("days_left, words", [
    (None, "not within the horizon"), (0.0, "at the next forgetting pass"), (0.4, "within a day"),
    (1.0, "in 1 day"), (1.9, "in 1 day"), (2.0, "in 2 days"), (30.2, "in 30 days"),
])
def test_days_left_in_words_agree_with_the_number_shown(days_left, words):
    """1.5 days is shown as 1 day, not "1 days"; less than a day is not "in 0 days"."""
    from app.ui.timeline_state import days_text
    assert days_text(days_left) == words
