"""The evaluation gate's rule, adapter versions and lineage (no model needed)."""
from __future__ import annotations

import pytest

from core.errors import InvalidInput, NotFound
from core.finetune import adapters as versions
from core.finetune.dataset import build_training_set
from core.finetune.gate import KNOWN_FACTS, GateSettings, Scores, decide
from core.store.episodes import add_episode, trash_episode
from core.store.memories import add_memory, set_flag, update_memory


def hypothesis(db, claim, status):
    now = db.now()
    db.execute("INSERT INTO hypotheses(dimension, claim, status, created_at, updated_at) VALUES ('style', ?, ?, ?, ?)",
               (claim, status, now, now))
    return db.conn.last_insert_rowid()


def texts(training):
    return [m["content"] for ex in training.examples for m in ex["messages"]]


def test_the_gate_accepts_only_a_better_adapter_within_the_general_margin():
    base = Scores(probe_loss=4.0, general_ppl=20.0)
    assert decide(base, Scores(3.0, 21.0)).accept
    rejected = decide(base, Scores(3.0, 23.0))
    assert not rejected.accept and "beyond the margin" in rejected.reasons[1]
    assert not decide(base, Scores(3.95, 20.0)).accept  # under the 2% improvement asked for
    assert decide(base, Scores(3.95, 20.0), GateSettings(min_probe_improvement=0.0)).accept
    assert not decide(base, Scores(float("nan"), 20.0)).accept


def test_the_gate_rejects_an_adapter_that_forgets_known_facts_and_says_by_how_much():
    base = Scores(probe_loss=4.0, general_ppl=20.0, known_fact_loss=1.0)
    kept = decide(base, Scores(3.0, 20.5, 1.05))
    assert kept.accept and "known facts: loss 1.000 -> 1.050 (within the margin; ceiling 1.100)" in kept.reasons[2]
    forgot = decide(base, Scores(3.0, 20.5, 1.2))  # better probes, same plain text, but common knowledge lost
    assert not forgot.accept and "known facts: loss 1.000 -> 1.200 (beyond the margin" in forgot.reasons[2]
    assert decide(base, Scores(3.0, 20.5, 1.2), GateSettings(max_known_fact_loss_rise=0.25)).accept
    assert not decide(base, Scores(3.0, 20.5, float("inf"))).accept
    # an adapter scored before known facts were measured is judged on the other two
    assert decide(Scores(4.0, 20.0), Scores(3.0, 20.5, 1.2)).accept
    assert len(KNOWN_FACTS) >= 6 and all(q.endswith("?") and a for q, a in KNOWN_FACTS)


def record(db, sources, status="accepted", path="/a"):
    return versions.record_adapter(db, name="a", base_model="m", path=path, status=status, metrics={"x": 1},
                                   config={}, sources=sources)


def test_versions_activate_switch_and_roll_back(db):
    first = record(db, {"memory": [1]})
    second = record(db, {"memory": [2]})
    failed = record(db, {}, status="failed")
    assert versions.active_adapter(db) is None
    versions.activate(db, first.id)
    assert versions.activate(db, second.id).active and not versions.get_adapter(db, first.id).active
    assert versions.active_adapter(db).id == second.id
    with pytest.raises(InvalidInput):
        versions.activate(db, failed.id)
    assert versions.active_adapter(db).id == second.id  # a refused switch changes nothing
    assert versions.rollback_to_base(db).id == second.id and versions.active_adapter(db) is None
    assert [a.id for a in versions.list_adapters(db)] == [failed.id, second.id, first.id]
    with pytest.raises(NotFound):
        versions.get_adapter(db, 99)
    with pytest.raises(InvalidInput):
        record(db, {}, status="great")


def test_trashing_an_instruction_the_active_adapter_learned_from_marks_it_stale_and_the_next_set_drops_it(db,
                                                                                                         clock):
    metric = add_episode(db, "Use metric units from now on.", "Will do.")
    short = hypothesis(db, "The user prefers short answers.", "confirmed")
    training = build_training_set(db)
    assert training.episode_ids == [metric] and training.hypothesis_ids == [short]
    adapter = record(db, {"memory": training.memory_ids, "episode": training.episode_ids,
                          "hypothesis": training.hypothesis_ids})
    versions.activate(db, adapter.id)
    other = record(db, {"hypothesis": [short]})
    assert [a.id for a in versions.adapters_using(db, "episode", metric)] == [adapter.id]
    assert versions.active_is_stale(db) is None
    clock.advance(60)
    trash_episode(db, metric)
    stale = versions.active_adapter(db)
    assert stale.is_stale and stale.stale_at == clock() and f"conversation {metric}" in stale.stale_reason
    assert versions.active_is_stale(db) == stale.stale_reason
    notice = versions.active_adapter_notice(db, "episode", [metric])  # what the panel and the CLI say at once
    assert "learned from this episode" in notice and "marked stale" in notice and "rollback" in notice
    assert not versions.get_adapter(db, other.id).is_stale  # it never learned from that turn
    after = build_training_set(db)
    assert after.episode_ids == [] and "metric_units" not in after.styles
    assert versions.sources(db, adapter.id)["episode"] == [metric]  # lineage keeps the id, not the text


def test_editing_a_fact_or_rejecting_a_hypothesis_marks_adapters_stale(db):
    fact = add_memory(db, "The user lives in Rome.", confidence=0.9)
    claim = hypothesis(db, "Prefers bullet points.", "confirmed")
    by_fact = record(db, {"memory": [fact]})
    by_claim = record(db, {"hypothesis": [claim]})
    set_flag(db, fact, "pinned", True)  # pinning does not change what it learned
    assert not versions.get_adapter(db, by_fact.id).is_stale
    update_memory(db, fact, statement="The user lives in Milan.")
    assert versions.get_adapter(db, by_fact.id).is_stale
    db.execute("UPDATE hypotheses SET status = 'rejected', updated_at = ? WHERE id = ?", (db.now(), claim))
    assert versions.get_adapter(db, by_claim.id).is_stale
    assert "Milan" not in " ".join(texts(build_training_set(db)))  # facts are never trained on


def test_the_baseline_key_changes_with_the_weights_the_adapter_and_the_sets(tmp_path):
    """A later run reuses the base model's scores only when nothing they depend on has changed."""
    import os
    from models.finetune import baseline_key
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"x" * 10)
    sets = {"probes": [{"question": "q", "answer": "a"}], "general": ["g"], "known_facts": []}
    key = baseline_key(str(model), None, sets)
    assert baseline_key(str(model), None, dict(sets)) == key
    assert baseline_key(str(model), None, {**sets, "probes": [{"question": "q2", "answer": "a"}]}) != key
    assert baseline_key(str(model), str(tmp_path / "adapter"), sets) != key
    os.utime(model / "model.safetensors", ns=(1, 1))  # the weights replaced at the same path
    assert baseline_key(str(model), None, sets) != key


def test_scored_baseline_is_found_only_under_its_key(tmp_path):
    from core.finetune import adapters as versions
    from core.store.db import open_db
    from models.finetune import scored_baseline
    db = open_db(tmp_path / "engram.db")
    try:
        base = {"probe_loss": 3.0, "general_ppl": 50.0, "known_fact_loss": 1.0}
        versions.record_adapter(db, name="a", base_model="m", path=str(tmp_path / "a"), status="rejected",
                                metrics={"baseline": base, "baseline_key": "k1",
                                         "probe_loss_by_kind": {"baseline": {"preference": 3.0}}},
                                config={}, sources={})
        assert scored_baseline(db, "k1") == {**base, "probe_loss_by_kind": {"preference": 3.0}}
        assert scored_baseline(db, "k2") is None
    finally:
        db.close()
