"""`engram jobs list|run|pause|cancel` against a real store in a temporary data folder."""
from __future__ import annotations

import json

import pytest

from app.cli.main import build_parser, run_cli
from app.cli.jobs import build_scheduler
from app.services.wiring import Services
from core.errors import EngramError
from core.jobs import Step, stepwise
from core.store import jobs as store


class ServicesWithLoop(Services):
    """Services as the app will build them, with a learning-loop handler supplied."""

    log: list

    def job_handlers(self):
        def step(payload, state):
            i = state.get("i", 0) + 1
            self.log.append(i)
            return Step(state={"i": i}, fraction=i / 3, message=f"batch {i}", done=i >= 3)
        return {"forget": stepwise(step)}


@pytest.fixture
def services(tmp_path):
    svc = ServicesWithLoop.from_data_dir(tmp_path / "home")
    svc.log = []
    yield svc
    svc.close()


def run(services, *argv):
    args = build_parser().parse_args(list(argv))
    return args.func(args, services)


def test_list_is_empty_then_shows_queued_jobs_with_why_they_wait(services, capsys):
    assert run(services, "jobs", "list") == 0
    assert "no open jobs" in capsys.readouterr().out
    store.enqueue(services.db, "forgetting")
    assert run(services, "jobs", "list") == 0
    out = capsys.readouterr().out
    assert "forgetting" in out and "queued" in out and "waiting:" in out
    assert run(services, "jobs", "list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["kind"] == "forgetting" and rows[0]["state"] == "queued"


def test_run_a_kind_now_in_the_foreground(services, capsys):
    assert run(services, "jobs", "run", "forgetting") == 0
    out = capsys.readouterr().out
    assert "done" in out and services.log == [1, 2, 3]
    assert store.list_jobs(services.db)[0].state == "done"
    assert run(services, "jobs", "list", "--all") == 0
    assert "done" in capsys.readouterr().out


def test_pause_then_run_resumes_from_the_checkpoint(services, capsys):
    job = store.enqueue(services.db, "forgetting")
    store.claim(services.db, job.id, "elsewhere")
    store.save_checkpoint(services.db, job.id, {"i": 2})
    assert run(services, "jobs", "pause", str(job.id)) == 0
    assert "stops at its next checkpoint" in capsys.readouterr().out
    assert store.get_job(services.db, job.id).requested == "pause"
    store.finish(services.db, job.id, "paused")  # what the running process does at its checkpoint
    assert run(services, "jobs", "run", str(job.id)) == 0
    assert services.log == [3] and store.get_job(services.db, job.id).state == "done"


def test_cancel_a_queued_job_and_refuse_a_finished_one(services, capsys):
    job = store.enqueue(services.db, "forgetting")
    assert run(services, "jobs", "cancel", str(job.id)) == 0
    assert "cancelled" in capsys.readouterr().out
    with pytest.raises(Exception, match="already cancelled"):
        run(services, "jobs", "cancel", str(job.id))


def test_a_kind_this_process_cannot_run_is_left_queued_for_the_app(services, capsys):
    queued = store.enqueue(services.db, "newer-kind")  # written by a newer Engram sharing this folder
    with pytest.raises(EngramError, match="the app will pick it up"):  # run_cli: one `engram: …` line, exit 1
        run(services, "jobs", "run", str(queued.id))
    job = store.list_jobs(services.db)[0]
    assert job.kind == "newer-kind" and job.state == "queued" and job.run_now


def test_every_standard_kind_has_a_real_handler(services):
    assert set(build_scheduler(services).specs) == {"reflection", "consolidation", "forgetting", "finetune"}


def test_bad_input_is_a_clear_error_and_changes_nothing(tmp_path, capsys):
    home = str(tmp_path / "h")
    assert run_cli(["--data-dir", home, "jobs", "run", "dance"]) == 1
    assert "unknown job kind" in capsys.readouterr().err
    assert run_cli(["--data-dir", home, "jobs", "run", "forgetting", "--payload", "[1]"]) == 1
    assert "JSON object" in capsys.readouterr().err
    assert run_cli(["--data-dir", home, "jobs", "pause", "99"]) == 1
    assert "no job with id 99" in capsys.readouterr().err
    assert run_cli(["--data-dir", home, "jobs", "list", "--all"]) == 0
    assert "no jobs" in capsys.readouterr().out


def test_finetune_status_adapters_activate_and_rollback(services, capsys):
    from core.finetune import adapters as versions
    from core.store.memories import add_memory, trash_memory
    fact = add_memory(services.db, "The user's dog is Rex.", confidence=0.9)
    metrics = {"baseline": {"probe_loss": 5.0, "general_ppl": 30.0},
               "candidate": {"probe_loss": 2.0, "general_ppl": 31.0}}
    one = versions.record_adapter(services.db, name="first", base_model="m", path="/a", status="accepted",
                                  metrics=metrics, config={}, sources={"memory": [fact]})
    scored = {"baseline": {**metrics["baseline"], "known_fact_loss": 1.0},
              "candidate": {**metrics["candidate"], "known_fact_loss": 4.38}}
    two = versions.record_adapter(services.db, name="second", base_model="m", path="/b", status="rejected",
                                  metrics=scored, config={}, sources={})
    assert run(services, "finetune", "status") == 0
    assert "the base model" in capsys.readouterr().out
    assert run(services, "finetune", "activate", str(one.id)) == 0
    assert versions.active_adapter(services.db).id == one.id
    trash_memory(services.db, fact)
    capsys.readouterr()
    assert run(services, "finetune", "status") == 0
    out = capsys.readouterr().out
    assert f"adapter {one.id}" in out and "stale: memory" in out and "5.000 -> 2.000" in out
    assert run(services, "finetune", "adapters") == 0
    out = capsys.readouterr().out
    assert "ACTIVE stale" in out and "rejected" in out
    assert "held-out probes 5.000 -> 2.000" in out and "known facts 1.000 -> 4.380" in out
    assert run(services, "finetune", "rollback") == 0
    assert "back to the base model" in capsys.readouterr().out and versions.active_adapter(services.db) is None
    assert two.id != one.id


def test_finetune_tonight_queues_for_the_quiet_hours_and_now_needs_a_model(services, capsys):
    assert run(services, "finetune", "tonight") == 0
    assert "between 01:00 and 06:00" in capsys.readouterr().out
    [job] = store.list_jobs(services.db)
    assert job.kind == "finetune" and not job.run_now
    with pytest.raises(Exception, match="no chat model is chosen"):
        run(services, "finetune", "now")
    assert len(store.list_jobs(services.db)) == 1  # nothing queued by the refused command
    assert run(services, "jobs", "list") == 0
    out = capsys.readouterr().out
    assert "finetune" in out and "waiting:" in out
