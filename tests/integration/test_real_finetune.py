"""The fine-tune gate on real weights (SmolLM2-135M-Instruct, issue 17 part 6): six confirmed preferences go
through Engram's own path — dataset builder, training process, scoring process, gate, adapter versions — twice,
each run judged against the base model. A short run at a sensible learning rate raises the likelihood of the
held-out preference probes (a question it never trained on) and leaves plain-text perplexity and known facts
within the gate's margins: accepted and activated. The same data at a learning rate four times higher damages
both: rejected, with the figures in its reasons, and the base model stays in use.

The two runs share one store (each step of the 135M model costs seconds on this CPU). The rejected run is marked
heavy — the default run leaves it out to keep the suite within its ten minutes; `pytest -m heavy` runs it — and
bench/finetune.py --gate records the same runs and a third (over-trained) one.
"""
from __future__ import annotations

import pytest

from bench.finetune import GATE_RUNS, PREFERENCES, add_preferences, gate_run
from core.finetune import adapters as versions
from core.finetune.gate import GateSettings
from core.store.db import open_db

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gate_runs(real_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("real-finetune")
    db = open_db(folder / "engram.db")
    hypothesis_ids = add_preferences(db)
    good = gate_run(db, str(real_model_dir), folder / "adapters", GATE_RUNS["accept"])
    runs = {"db": db, "folder": folder, "model": str(real_model_dir), "good": good,
            "active_after_good": versions.active_adapter(db), "hypothesis_ids": hypothesis_ids}
    yield runs
    db.close()


@pytest.fixture(scope="module")
def bad_run(gate_runs):
    """The second run, judged against the base model too (its scores were measured by the first run)."""
    db = gate_runs["db"]
    versions.rollback_to_base(db)
    bad = gate_run(db, gate_runs["model"], gate_runs["folder"] / "adapters", GATE_RUNS["reject_high_learning_rate"])
    return {**gate_runs, "bad": bad, "active_after_bad": versions.active_adapter(db)}


# Issue 42 changed what these runs train on (style demonstrations, probed in new situations, instead of the
# preference's own sentence). Re-run on 2026-11-28 at load 9-12 on the 2-core machine: the first run's scoring
# process alone outlasted pytest's 600 s (before the gate's scoring was batched), so these two stay heavy and
# unconfirmed on the new data: `pytest -m heavy tests/integration/test_real_finetune.py`.
@pytest.mark.heavy
def test_a_short_run_on_consistent_preferences_is_accepted(gate_runs):
    good = gate_runs["good"]
    base, new = good.metrics["baseline"], good.metrics["candidate"]
    settings = GateSettings()
    # (a) the held-out preference probes became likelier: the mean log-prob per answer token rose by the
    # gate's margin, and every probe is a preference (nothing else was confirmed)
    assert good.metrics["probe_loss_by_kind"]["candidate"].keys() == {"preference"}
    assert new["probe_loss"] <= base["probe_loss"] * (1 - settings.min_probe_improvement)
    # (b) plain text and what the base model knew are left alone, within the documented tolerances
    assert new["general_ppl"] <= base["general_ppl"] * (1 + settings.max_general_ppl_rise)
    assert new["known_fact_loss"] <= base["known_fact_loss"] * (1 + settings.max_known_fact_loss_rise)
    assert good.status == "accepted" and good.metrics["gate"]["accept"]
    reasons = good.metrics["gate"]["reasons"]
    assert "(better;" in reasons[0] and "within the margin" in reasons[1] and "within the margin" in reasons[2]
    assert gate_runs["active_after_good"].id == good.id
    assert versions.sources(gate_runs["db"], good.id)["hypothesis"] == gate_runs["hypothesis_ids"]
    assert len(gate_runs["hypothesis_ids"]) == len(PREFERENCES)


@pytest.mark.heavy  # another minute and more on this CPU: `pytest -m heavy`; bench/finetune.py --gate records it
def test_a_far_too_high_learning_rate_is_rejected_for_what_it_damaged(bad_run):
    gate_runs = bad_run
    bad, good = gate_runs["bad"], gate_runs["good"]
    base, new = bad.metrics["baseline"], bad.metrics["candidate"]
    assert base == good.metrics["baseline"]  # the same base figures: both runs judged against the base model
    # the base model on the same sets was scored by the first run: the second reuses its figures
    assert bad.metrics["baseline_reused"] and not good.metrics["baseline_reused"]
    assert bad.status == "rejected" and not bad.metrics["gate"]["accept"] and not bad.active
    reasons = bad.metrics["gate"]["reasons"]
    # it damaged plain text and common knowledge beyond the margins, and the reasons say so with the figures
    assert "beyond the margin" in reasons[1] and f"{new['general_ppl']:.2f}" in reasons[1]
    assert "known facts" in reasons[2] and "beyond the margin" in reasons[2]
    assert new["general_ppl"] > base["general_ppl"] * 1.10 and new["known_fact_loss"] > base["known_fact_loss"] * 1.10
    assert gate_runs["active_after_bad"] is None  # rolled back before it, and the rejected one was not activated
    assert bad.parent_id is None and bad.config["learning_rate"] == 4 * good.config["learning_rate"]


# Passed on SmolLM2 on 2026-11-28 (commit afa415c, OMP_NUM_THREADS=1, load ~11): 412 s, most of it the early stop's
# six readings of the gate's measures. Minutes of a real model, so heavy: `pytest -m heavy` runs it. The other
# outcome of the first hour, too little to learn and nothing queued, runs by default:
# tests/integration/test_finetune_cli.py::test_the_first_hour_store_queues_no_fine_tune_and_says_why.
@pytest.mark.heavy
def test_the_first_hour_store_with_two_instructions_gives_an_accepted_adapter_that_moves_the_preferences(
        real_model_dir, tmp_path):
    """Issue 42's first hour (five facts, a pinned move, a critical allergy, rated replies) plus "metric units from
    now on" and "shorter answers": the recipe chosen from its 9 examples trains an adapter the gate accepts — the
    held-out situations' preferred replies became likelier, and more so than the replies ignoring the preference —
    with plain text and known facts inside the gate. It learned from the instructions, never a fact."""
    from core.finetune.dataset import build_training_set
    from models.finetune import config_from_recipe
    from tests.finetune_store import first_hour_store, say_standing_instructions
    from bench.finetune import gate_run
    db = open_db(tmp_path / "engram.db")
    stored = first_hour_store(db)
    instructions = say_standing_instructions(db)
    training = build_training_set(db)
    recipe = config_from_recipe(training)
    assert (training.size, recipe.steps, recipe.objective) == (9, 5, "orpo")
    adapter = gate_run(db, str(real_model_dir), tmp_path / "adapters", None)
    m = adapter.metrics
    base, new, settings = m["baseline"], m["candidate"], GateSettings()
    assert adapter.status == "accepted" and adapter.active, m["gate"]["reasons"]
    assert m["probe_loss_by_kind"]["candidate"]["preference"] < m["probe_loss_by_kind"]["baseline"]["preference"]
    assert m["preference_margin"]["candidate"] > m["preference_margin"]["baseline"]
    assert new["general_ppl"] <= base["general_ppl"] * (1 + settings.max_general_ppl_rise)
    assert new["known_fact_loss"] <= base["known_fact_loss"] * (1 + settings.max_known_fact_loss_rise)
    learned = versions.sources(db, adapter.id)
    assert learned["memory"] == [] and set(instructions) <= set(learned["episode"])
    assert not set(stored["rated"][:2]) & set(learned["episode"])
    assert adapter.config["steps"] == 5
    db.close()
