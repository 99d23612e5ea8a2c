"""A recipe too hot for the model: when the first reading of a run already has plain text or known facts outside the
gate's margins, the fine-tune starts again from the base at a quarter of the learning rate, at most twice, and says
so. (Qwen2.5-0.5B's known-fact loss went 0.52 -> 3.70 after the recipe's first two steps at 5e-4.) The worker is
faked here to drive the logic; tests/integration/test_finetune_e2e.py runs it on the real tiny model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.finetune import adapters as versions
from core.finetune.recipe import cooler_rate
from models import finetune
from models.finetune import FineTuner, WorkerResult
from tests.finetune_store import first_hour_store, say_standing_instructions

BASE = {"probe_loss": 2.7, "general_ppl": 46.0, "known_fact_loss": 0.52, "preference_margin": 0.1}
BROKEN = {"probe_loss": 4.2, "general_ppl": 50.4, "known_fact_loss": 3.70, "preference_margin": -0.2, "step": 2}
GOOD = {"probe_loss": 2.4, "general_ppl": 46.5, "known_fact_loss": 0.53, "preference_margin": 0.3, "step": 2}


class FakeWorker:
    """Trains nothing: writes the early stop's readings a run at `config['learning_rate']` would have left."""

    def __init__(self, hot_above: float) -> None:
        self.hot_above = hot_above
        self.calls: list[dict] = []

    def __call__(self, mode, config, folder, **_):
        adapter = Path(config["adapter_dir"])
        seen = json.loads((adapter / "early_stop.json").read_text()) if (adapter / "early_stop.json").exists() else {}
        self.calls.append({"mode": mode, "learning_rate": config["learning_rate"], "found": sorted(
            p.name for p in adapter.iterdir()) if adapter.exists() else [], "base_given": seen.get("base")})
        adapter.mkdir(parents=True, exist_ok=True)
        hot = config["learning_rate"] > self.hot_above
        (adapter / "adapters.safetensors").write_bytes(b"weights")
        (adapter / "early_stop.json").write_text(json.dumps(
            {"base": BASE, "best": None if hot else GOOD, "last": BROKEN if hot else GOOD, "misses": 0}))
        return WorkerResult(exit_code=0, events=[{"event": "done", "step": 2}])


def run(db, tmp_path, monkeypatch, worker):
    from tests.integration.test_finetune_e2e import scheduler
    first_hour_store(db)
    say_standing_instructions(db)
    monkeypatch.setattr(finetune, "run_worker", worker)
    sched = scheduler(db, FineTuner(db, "a-model-folder", tmp_path / "adapters"))  # the recipe's own config
    return sched.run_job(sched.enqueue("finetune", run_now=True).id)


def test_a_too_hot_run_starts_again_at_a_quarter_of_the_rate_and_keeps_the_base_scores(db, tmp_path, monkeypatch):
    worker = FakeWorker(hot_above=2e-4)
    final = run(db, tmp_path, monkeypatch, worker)
    assert final.state == "done", final.last_error
    first, second = worker.calls
    assert second["learning_rate"] == pytest.approx(first["learning_rate"] / 4)
    assert second["found"] == ["early_stop.json"] and second["base_given"] == BASE  # the hot weights are gone
    [adapter] = versions.list_adapters(db)
    assert adapter.status == "accepted" and adapter.config["learning_rate"] == pytest.approx(second["learning_rate"])
    [hot] = adapter.metrics["too_hot"]
    assert hot["learning_rate"] == pytest.approx(first["learning_rate"]) and hot["known_fact_loss"] == 3.70


def test_a_model_too_hot_at_every_rate_is_cooled_twice_then_left_to_the_gate(db, tmp_path, monkeypatch):
    worker = FakeWorker(hot_above=0.0)
    final = run(db, tmp_path, monkeypatch, worker)
    assert final.state == "done", final.last_error
    rates = [c["learning_rate"] for c in worker.calls]
    assert len(rates) == 3 and rates[1] == pytest.approx(rates[0] / 4) and rates[2] == pytest.approx(rates[1] / 4)
    [adapter] = versions.list_adapters(db)
    assert adapter.status == "rejected" and not adapter.active
    assert len(adapter.metrics["too_hot"]) == 2 and "kept the active one" in final.message


def test_a_run_inside_the_margins_is_trained_once(db, tmp_path, monkeypatch):
    worker = FakeWorker(hot_above=1.0)
    run(db, tmp_path, monkeypatch, worker)
    assert len(worker.calls) == 1 and versions.list_adapters(db)[0].metrics["too_hot"] == []


@pytest.mark.parametrize("rate, coolings, expected", [(4e-4, 0, 1e-4), (1e-4, 1, 2.5e-5), (1e-4, 2, None),
                                                     (float("nan"), 0, None)])
def test_the_cooler_rate(rate, coolings, expected):
    assert cooler_rate(rate, coolings) == (expected if expected is None else pytest.approx(expected))
