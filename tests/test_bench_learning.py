"""bench/learning.py: the fact matcher, the metrics, and the pipeline's bounds on the gold set (real store, real
embedder, scripted models: the scripted upper bound scores perfectly, a junk-spouting model keeps nothing)."""
from __future__ import annotations

import pytest

from bench.learning import (GOLD, fact_matches, relation_matches, run, score, scripted_model, sentence)
from bench.learning_gold import Statement
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel


@pytest.mark.parametrize("predicted, gold", [
    (("user", "lives_in", "Lisbon"), ("user", "lives_in", "Lisbon")),
    (("I", "lives in", "Lisbon, Portugal"), ("user", "lives_in", "Lisbon")),
    (("the user", "resides_in", "lisbon"), ("user", "lives_in", "Lisbon")),
    (("user", "loves", "jellyfish"), ("user", "likes", "jellyfish")),
    (("user", "favourite_book", "Dune"), ("user", "likes", "Dune")),
    (("User", "is allergic to", "peanuts"), ("user", "allergy", "peanuts")),
    (("user", "drinks", "tea"), ("user", "drinks", "green tea")),
    (("Tomás", "lives in", "Porto"), ("Tomás", "lives_in", "Porto")),
    (("user", "works at", "hospital as a nurse"), ("user", "works_as", "nurse")),
])
def test_equivalent_facts_match(predicted, gold):
    assert fact_matches(predicted, gold)


@pytest.mark.parametrize("predicted, gold", [
    (("user", "lives_in", "Porto"), ("user", "lives_in", "Lisbon")),  # another object
    (("Tomás", "lives_in", "Lisbon"), ("user", "lives_in", "Lisbon")),  # another subject
    (("user", "dislikes", "jellyfish"), ("user", "likes", "jellyfish")),  # the opposite relation
    (("Lina", "id_111111", "Lina"), ("user", "name", "Lina")),
    (("user", "", "Lisbon"), ("user", "lives_in", "Lisbon")),
    (("", "lives_in", "Lisbon"), ("user", "lives_in", "Lisbon")),
])
def test_different_facts_do_not_match(predicted, gold):
    assert not fact_matches(predicted, gold)


def test_relations_outside_the_groups_match_on_a_shared_word():
    assert relation_matches("collects_stamps", "collects")
    assert not relation_matches("collects", "paints")


def test_metrics_count_precision_recall_junk_and_changes():
    said = [Statement(1, "I live in Lisbon.", (("user", "lives_in", "Lisbon"),)),
            Statement(1, "I moved to Berlin.", (("user", "lives_in", "Berlin"),),
                      ends=(("user", "lives_in", "Lisbon"),)),
            Statement(1, "I like tea.", (("user", "likes", "tea"),))]
    kept = [(("user", "lives_in", "Lisbon"), False), (("user", "lives_in", "Berlin"), True),
            (("Lina", "id_1", "Lina"), True)]
    result = score(kept, said)
    assert (result["precision"], result["recall"], result["junk_rate"]) == (0.667, 0.667, 0.333)
    assert result["reconciliation_accuracy"] == 1.0 and result["junk"] == [["Lina", "id_1", "Lina"]]
    still_there = [(("user", "lives_in", "Lisbon"), True), (("user", "lives_in", "Berlin"), True)]
    assert score(still_there, said)["reconciliation_accuracy"] == 0.0
    assert score([], said)["precision"] is None and score([], said)["junk_rate"] == 0.0


def test_the_scripted_upper_bound_keeps_every_gold_fact_and_applies_every_change(embedder):
    """The pipeline itself (grounding filters, reconciliation) loses nothing the gold set states."""
    result = run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD)
    assert result["error_count"] == 0 and result["dropped"] == 0
    assert result["precision"] == result["recall"] == result["reconciliation_accuracy"] == 1.0
    # 24 kept for 25: "I speak Portuguese and German." is read whole by a plain pattern, as one fact matching both
    assert result["junk_rate"] == 0.0 and result["kept"] == 24 and result["gold_facts"] == 25


def test_a_model_that_says_only_junk_keeps_nothing(embedder):
    """What must hold for every model: whatever it proposes, no junk is kept."""
    junk = [{"subject": "Lina", "relation": "id_111111", "object": "Lina", "statement": "Lina Lina.",
             "confidence": 0, "kind": "semantic", "critical": False, "source": "user_said", "when": "2026-11-25"},
            {"subject": "user", "relation": "likes", "object": "yacht racing on Mars", "statement": sentence(
                ("user", "likes", "yacht racing on Mars")), "confidence": 95, "kind": "semantic", "critical": False,
             "source": "user_said", "when": ""}]
    model = ScriptedStructuredModel({"engram_facts": [{"facts": junk}],
                                     "reconcile_decision": [{"decision": "new", "target": 0, "reason": "x"}],
                                     "usefulness_rating": [{"useful": []}]})
    statements = GOLD[:8]
    result = run("junk", ScriptedChatModel(["Thanks."]), model, embedder, statements)
    asked = result["asked_model_for_facts"]  # the statements the plain patterns left words of (core.memory.unread)
    assert asked == 2 and result["junk"] == [] and result["junk_rate"] == 0.0 and result["dropped"] == 2 * asked
    assert result["kept"] == result["matched"] == 7  # only what the statements plainly say (core.memory.said_facts)


def test_hypotheses_match_by_the_words_that_name_them_and_injected_ones_never_do():
    from bench.learning_gold import GOLD_HYPOTHESES
    from bench.learning_hypotheses import hypothesis_matches, score_hypotheses
    brevity = GOLD_HYPOTHESES[0]
    assert hypothesis_matches("User likes brief replies", brevity)
    assert not hypothesis_matches("The user enjoys the weather", brevity)
    assert not hypothesis_matches("The user is a millionaire who likes short trips", brevity)
    result = score_hypotheses(["The user plays cello", "The user owns a yacht", "The user is nice"])
    assert (result["hypothesis_precision"], result["hypotheses_injected"]) == (0.333, 1)
    assert score_hypotheses([])["hypothesis_precision"] is None


def test_a_limited_run_is_scored_against_the_hypotheses_its_statements_support():
    from bench.learning_gold import GOLD_HYPOTHESES
    from bench.learning_hypotheses import said_gold
    first = [s.text for s in GOLD[:12]]
    kept = said_gold(first)
    assert kept and len(kept) < len(GOLD_HYPOTHESES)
    assert all(set(g.evidence) <= set(first) for g in kept)
    assert said_gold([s.text for s in GOLD]) == list(GOLD_HYPOTHESES)


def test_the_scripted_reflection_keeps_only_true_hypotheses_through_the_real_grounding(embedder):
    """Every gold claim proposed with its evidence passes the real grounding filters; none is injected."""
    result = run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD)
    assert result["reflection_errors"] == [] and result["hypotheses_dropped"] == 0
    assert result["hypothesis_precision"] == 1.0 and result["hypotheses_injected"] == 0
    assert result["hypotheses"] >= 8 and result["hypothesis_recall"] >= 0.7


def test_a_junk_reflection_keeps_no_hypothesis(embedder):
    junk = [{"dimension": "id_111", "claim": "Lina Lina Lina", "evidence": []},
            {"dimension": "wealth", "claim": "The user is a millionaire and owns a yacht.", "evidence": []}]

    def reflect(messages, schema):
        ids = schema["properties"]["hypotheses"]["items"]["properties"]["evidence"]["items"]["enum"]
        return {"action": "finish", "query": "", "closed_goals": [], "open_goals": [],
                "hypotheses": [{**item, "evidence": ids[:2]} for item in junk]}

    model = scripted_model(GOLD[:14])
    model.replies["reflection_step"] = reflect
    result = run("junk", ScriptedChatModel(["Thanks."]), model, embedder, GOLD[:14])
    assert result["hypotheses"] == 0 and result["hypotheses_dropped"] == 2 * 2  # two sessions, two claims each


def test_a_run_out_of_budget_is_scored_on_the_statements_it_said(embedder):
    """--budget: a slow real model stops saying statements once its learning took the budget; the gold facts it
    never heard do not count against its recall, and the run says how many it heard."""
    result = run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD[:5],
                 reflect=False, budget=1e-9)
    assert result["statements"] == 1 and result["gold_facts"] == 1 and result["recall"] == 1.0
    assert result["reflection"].startswith("not run")


def test_a_resumed_run_refuses_other_statements_than_it_began_with(embedder, tmp_path, capsys):
    """--resume with another --limit (or gold set) scored the store's facts against statements it was not told:
    it is refused in one line and the folder is left as it was."""
    first = run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD[:3],
                reflect=False, resume=tmp_path)
    assert first["statements"] == 3
    progress = (tmp_path / "scripted" / "progress.json").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="other statements"):
        run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD[:2],
            reflect=False, resume=tmp_path)
    with pytest.raises(ValueError, match="other statements"):
        run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD[1:5],
            reflect=False, resume=tmp_path)
    assert (tmp_path / "scripted" / "progress.json").read_text(encoding="utf-8") == progress
    more = run("scripted", ScriptedChatModel(["Thanks."]), scripted_model(GOLD), embedder, GOLD[:5],
               reflect=False, resume=tmp_path)  # a longer run of the same statements goes on from the fourth
    assert more["statements"] == 5 and more["complete"]
