"""The Jobs panel against a real store: conditions, the queue, pause/cancel, adapters; and a real fine-tune on
the tiny MLX model started from the panel, whose progress and loss curve the panel shows while it runs."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.services.wiring import Services  # noqa: E402
from app.ui.jobs_state import Conditions, eta, loss_point  # noqa: E402
from core.conditions import LEARNING, REPLYING  # noqa: E402
from app.ui.panel_widgets import BAR_ROLE  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.finetune import adapters as versions  # noqa: E402
from core.jobs import standard_specs  # noqa: E402
from core.scheduler import Environment, Scheduler  # noqa: E402
from core.store import jobs as store  # noqa: E402
from core.store.jobs import Job  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.memories import add_memory, update_memory  # noqa: E402

TINY = dict(num_layers=2, rank=8, learning_rate=1e-4, epochs=8, save_every=4, steps_per_report=2)


@pytest.fixture
def window(qtbot, tmp_path):
    services = Services.from_data_dir(tmp_path / "home")
    services.db  # noqa: B018 - reading the property opens the store; opened before the window's panels start using it from the database lane
    win = MainWindow(services)
    qtbot.addWidget(win)
    win.show()
    yield win
    for panel in win.panels.values():
        getattr(panel, "shutdown", lambda: None)()
    win.runner.shutdown(wait=True)
    services.close()


def _refreshed(qtbot, panel, action=None):
    with qtbot.waitSignal(panel.refreshed, timeout=10000):
        (action or panel.refresh)()


def _metrics(before, after):
    return {"baseline": {"probe_loss": before, "general_ppl": 20.0},
            "candidate": {"probe_loss": after, "general_ppl": 20.5}, "gate": {"accept": after < before}}


def test_a_long_queue_keeps_the_selection_across_polls(qtbot, window, window_db):
    db = window_db
    for n in range(250):
        store.enqueue(db, "forgetting", payload={"n": n})
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: panel.snapshot is not None, timeout=10000)
    assert panel.jobs_model.rowCount() == 200  # the newest 200 open jobs, then recent finished ones
    panel.jobs.selectRow(7)
    chosen = panel.selected_job_id()
    _refreshed(qtbot, panel)
    assert panel.selected_job_id() == chosen and panel.cancel_button.isEnabled()


def test_progress_messages_give_eta_and_loss_points():
    assert loss_point("step 12/40, loss 2.311, 850 tok/s, ETA 30s") == (12, 2.311)
    assert loss_point("scoring the new adapter") is None
    running = Job(id=1, kind="consolidation", state="running", progress=0.25, started_at=100.0)
    assert eta(running, 140.0) == pytest.approx(120.0)
    assert eta(Job(id=2, kind="finetune", state="running", message="step 1/9, loss 3.0, ETA 42s"), 0) == 42.0


def test_the_conditions_line_says_what_the_chat_does_with_the_model():
    now = dict(idle_seconds=0.0, idle_needed_seconds=600.0, on_ac_power=True, require_ac_power=True,
               quiet_start="01:00", quiet_end="06:00", in_quiet_hours=False)
    assert Conditions(**now, model_busy_with=None).summary().endswith(" · model free")
    assert Conditions(**now, model_busy_with=REPLYING).summary().endswith(" · chat is using the model")
    assert Conditions(**now, model_busy_with=LEARNING).summary().endswith(" · learning from your messages")


def test_queue_conditions_pause_cancel_and_tonight(qtbot, window, window_db):
    db = window_db
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: panel.snapshot is not None, timeout=10000)
    assert "background work starts after" in panel.conditions.text()
    assert panel.jobs_empty.isVisible()
    _refreshed(qtbot, panel, panel.finetune_tonight)
    [row] = panel.snapshot.jobs
    assert row.job.kind == "finetune" and row.job.state == "queued" and not row.job.run_now
    assert "waiting:" in panel.jobs_model.text(0, 4)
    panel.jobs.selectRow(0)
    assert panel.pause_button.isEnabled() and panel.cancel_button.isEnabled()
    _refreshed(qtbot, panel, panel.on_pause)
    assert store.get_job(db, row.job.id).state == "paused"
    panel.jobs.selectRow(0)
    _refreshed(qtbot, panel, panel.on_cancel)
    assert store.get_job(db, row.job.id).state == "cancelled"
    assert panel.jobs_model.text(0, 1) == "cancelled"


def test_adapters_activate_and_roll_back(qtbot, window, window_db):
    db = window_db
    older = versions.record_adapter(db, name="adapter one", base_model="m", path="/a", status="accepted",
                                    metrics=_metrics(2.0, 1.5), config={}, sources={})
    newer = versions.record_adapter(db, name="adapter two", base_model="m", path="/b", status="rejected",
                                    metrics=_metrics(1.5, 1.6), config={}, sources={})
    versions.activate(db, older.id)
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: panel.snapshot is not None, timeout=10000)
    assert panel.adapters.rowCount() == 2
    assert panel.adapters.item(1, 2).text() == "2.000 → 1.500"
    assert panel.active_label.text() == "In use: adapter one"
    panel.adapters.selectRow(0)  # newest first
    assert panel.selected_adapter_id() == newer.id and panel.activate_button.isEnabled()
    _refreshed(qtbot, panel, panel.on_activate)
    assert versions.active_adapter(db).id == newer.id
    _refreshed(qtbot, panel, panel.on_rollback)
    assert versions.active_adapter(db) is None
    assert panel.active_label.text() == "In use: the base model"


def test_a_stale_active_adapter_is_called_out(qtbot, window, window_db):
    db = window_db
    fact = add_memory(db, "User's dog is named Rex")
    adapter = versions.record_adapter(db, name="adapter one", base_model="m", path="/a", status="accepted",
                                      metrics=_metrics(2.0, 1.5), config={}, sources={"memory": [fact]})
    versions.activate(db, adapter.id)
    update_memory(db, fact, statement="User's dog is named Max")  # the store's trigger marks the adapter stale
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: panel.snapshot is not None, timeout=10000)
    assert f"memory {fact} changed" in panel.active_label.text() and "roll back" in panel.active_label.text()
    assert "stale" in panel.adapters.item(0, 5).text()


def test_run_now_runs_the_real_forgetting_job_on_the_jobs_thread(qtbot, window, window_db, embedder):
    import time
    from core.memory import forget
    from core.store.db import open_db
    services = window.services
    services._embedder = embedder  # the session's MiniLM: the forgetting handler re-indexes summaries with it
    old = open_db(services.db_path, clock=lambda: time.time() - 300 * 86400)
    stale = add_memory(old, "User once asked about a parking app", importance=0.0)
    old.close()
    add_episode(window_db, "Use metric units from now on.", "Will do.")  # something to fine-tune on (issue 42)
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: "forgetting" in panel.snapshot.kinds if panel.snapshot else False, timeout=10000)
    with qtbot.waitSignal(panel.job_finished, timeout=60000) as finished:
        panel.run_now("forgetting")
    final = finished.args[0]
    assert final.state == "done" and final.progress == 1.0, final.last_error
    assert "archived 1 fact," in final.message
    assert [e.item_id for e in forget.list_events(window_db)] == [stale]
    qtbot.waitUntil(lambda: panel.jobs_model.rowCount() == 1 and panel.jobs_model.text(0, 1) == "done", timeout=10000)
    assert panel.jobs_model.index(0, 2).data(BAR_ROLE) == 1.0


def _away(db, activity, gate):
    """The user has been away for hours, on power, at noon (outside the fine-tune's quiet hours)."""
    import time
    noon = time.struct_time((2026, 6, 1, 12, 0, 0, 0, 152, 0))
    return Environment(clock=db.clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: True,
                       localtime=lambda _t: noon, model_gate=gate)


def test_background_loop_learns_while_the_user_is_away(qtbot, window, window_db, embedder):
    import time
    from PySide6.QtWidgets import QApplication

    from app.ui.background_jobs import BackgroundJobs
    from core.memory import forget
    from core.store.db import open_db
    services = window.services
    services._embedder = embedder
    services.settings = services.settings.replace(chat_model="a-model-is-chosen")  # else no fine-tune is planned
    old = open_db(services.db_path, clock=lambda: time.time() - 300 * 86400)
    stale = add_memory(old, "User once asked about a parking app", importance=0.0)
    old.close()
    add_episode(window_db, "Use metric units from now on.", "Will do.")  # something to fine-tune on (issue 42)
    window.background = BackgroundJobs(services, poll_seconds=0.1, environment=_away).start(QApplication.instance())
    qtbot.waitUntil(lambda: store.last_finished(window_db, "forgetting") is not None, timeout=60000)
    assert [e.item_id for e in forget.list_events(window_db)] == [stale]
    finetune = store.list_jobs(window_db, kind="finetune")
    assert finetune and finetune[0].state == "queued"  # planned, but it waits for the quiet hours
    panel = window.show_panel("jobs")
    qtbot.waitUntil(lambda: panel.snapshot is not None and panel.snapshot.conditions is not None, timeout=10000)
    assert panel.conditions.text().startswith("You have been away")
    model = panel.jobs_model
    assert "waiting: outside quiet hours" in [model.text(r, 4) for r in range(model.rowCount())
                                              if model.text(r, 0).endswith("finetune")][0]
    window.background.stop()
    assert not window.background.running and window.background.error is None


def test_input_in_the_app_counts_as_activity(qtbot, window):
    import time
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from app.ui.background_jobs import BackgroundJobs
    background = BackgroundJobs(window.services, poll_seconds=0.1)
    window.background = background.start(QApplication.instance())
    time.sleep(0.3)
    assert background.activity.idle_seconds() >= 0.3
    qtbot.mouseClick(window.sidebar.viewport(), Qt.LeftButton)
    assert background.activity.idle_seconds() < 0.2
    window.close()  # the window's close stops the loop before the store closes
    assert not background.running


@pytest.mark.slow
def test_a_real_fine_tune_shows_progress_and_its_loss_curve(qtbot, window, window_db, tiny_model_dir):
    from models.finetune import FineTuner, TrainConfig
    from tests.finetune_store import first_hour_store, say_standing_instructions
    db = window_db
    first_hour_store(db)
    say_standing_instructions(db)  # what a fine-tune learns: how the user likes answers (issue 42)

    def tiny_scheduler(services, connection):
        tuner = FineTuner(connection, str(tiny_model_dir), services.data_dir / "adapters", TrainConfig(**TINY))
        return Scheduler(connection, standard_specs(finetune=tuner), settings=services.settings.scheduler,
                         env=Environment(clock=connection.clock))
    panel = window.show_panel("jobs")
    panel.scheduler_factory = panel.host.scheduler_factory = tiny_scheduler
    panel._scheduler = None
    qtbot.waitUntil(lambda: panel.snapshot is not None, timeout=10000)
    seen, drawn = [], []

    def record():
        rows = [r for r in panel.snapshot.jobs if r.job.kind == "finetune"] if panel.snapshot else []
        if rows and rows[0].job.state == "running" and 0 < rows[0].job.progress < 1:
            seen.append(rows[0].job.progress)
            drawn.append(len(panel.loss_curve.getData()[0] if panel.loss_curve.getData()[0] is not None else []))
    panel.refreshed.connect(record)
    with qtbot.waitSignal(panel.job_finished, timeout=240000) as finished:
        panel.run_now("finetune")
    final = finished.args[0]
    assert final.state == "done", final.last_error
    assert seen, "the panel never showed the running fine-tune part-way"
    # the curve moved while it trained: it had points part-way, and more by the end
    assert any(0 < n < len(panel.losses.curve(final.id)[0]) for n in drawn), drawn
    steps, losses = panel.losses.curve(final.id)
    assert len(steps) >= 2 and steps == sorted(steps) and all(v > 0 for v in losses)
    assert panel.loss_curve.getData()[0] is not None and len(panel.loss_curve.getData()[0]) == len(steps)
    qtbot.waitUntil(lambda: panel.adapters.rowCount() == 1, timeout=10000)
    assert versions.list_adapters(db)[0].metrics["candidate"]["probe_loss"] > 0


def test_a_fresh_install_queues_no_job_until_there_is_a_model_and_something_to_learn(qtbot, window, window_db,
                                                                                      tiny_model_dir):
    import time

    from PySide6.QtWidgets import QApplication

    from app.ui.background_jobs import BackgroundJobs
    services = window.services
    loop = BackgroundJobs(services, poll_seconds=0.05, environment=_away)
    window.background = loop.start(QApplication.instance())
    panel = window.show_panel("jobs")
    deadline = time.monotonic() + 1.5  # about thirty planning ticks of the loop
    qtbot.waitUntil(lambda: time.monotonic() > deadline, timeout=5000)
    _refreshed(qtbot, panel)
    assert store.list_jobs(window_db) == [] and panel.jobs_model.rowCount() == 0  # nothing to show a new user
    add_memory(window_db, "The user lives in Berlin.")  # something to forget one day: forgetting needs no model
    qtbot.waitUntil(lambda: [j.kind for j in store.list_jobs(window_db)] == ["forgetting"], timeout=10000)
    services.settings = services.settings.replace(chat_model=str(tiny_model_dir))  # a model is chosen
    qtbot.waitUntil(lambda: "consolidation" in {j.kind for j in store.list_jobs(window_db)}, timeout=10000)
    _refreshed(qtbot, panel)
    qtbot.waitUntil(lambda: panel.snapshot.finetune_not_ready is not None, timeout=10000)
    # a fact is nothing to fine-tune on: no fine-tune is queued, and the panel says why
    assert "finetune" not in {j.kind for j in store.list_jobs(window_db)}
    assert panel.readiness_label.isVisible()
    assert panel.readiness_label.text().startswith("No fine-tune queued: not enough to learn how you like answers")
    add_episode(window_db, "Use metric units from now on.", "Will do.")  # a standing instruction
    qtbot.waitUntil(lambda: "finetune" in {j.kind for j in store.list_jobs(window_db)}, timeout=10000)
    window.background.stop()
    assert window.background.error is None
