"""bench/finetune_preferences.py's deterministic scoring and its cases (no model): each style's check passes the
demonstrated reply and fails the same answer ignoring the preference; PrefEval and BEAM read the shared data. And
the run's chunks (bench/finetune_preferences_run.py): a stopped run keeps its chunks, the next asks only the rest."""
from __future__ import annotations

import json

import pytest

from bench import finetune_preferences as prefs
from bench import finetune_preferences_run as chunks
from core.finetune.styles import STYLES

pytestmark = pytest.mark.skipif(not (prefs.DATA / "prefeval").is_dir(), reason="../shared/data is not here")


@pytest.mark.parametrize("style", STYLES, ids=lambda s: s.name)
def test_each_style_check_tells_the_preferred_reply_from_the_one_ignoring_it(style):
    check = prefs.STYLE_CHECKS[style.name]
    for demo in style.train + style.probes:
        assert check(demo.reply), demo.reply
        assert not check(demo.contrast), demo.contrast


def test_prefeval_counts_a_reply_that_names_the_preference_and_not_one_that_echoes_the_question():
    case = {"set": "prefeval", "preference": "I follow a strict vegetarian diet.",
            "question": "Recommend a dinner in Madrid."}
    assert prefs.score(case, "Since you are vegetarian, try the grilled vegetables.") == 1.0
    assert prefs.score(case, "Try the dinner at a steak house in Madrid.") == 0.0


def test_beam_scores_each_rubric_item_by_its_content_words():
    case = {"set": "beam", "rubric": ["code blocks with syntax highlighting", "mentions status codes"]}
    assert prefs.score(case, "Here are code blocks with syntax highlighting.") == 0.5
    assert prefs.score(case, "Code blocks, syntax highlighting, and status codes.") == 1.0


def test_the_cases_span_the_dev_topics_and_both_beam_categories():
    cases = prefs.prefeval_cases(10)
    assert len({c["topic"] for c in cases}) == 10
    beam = prefs.beam_cases(4)
    assert [c["category"] for c in beam] == ["preference_following", "instruction_following"] * 2
    assert all(c["rubric"] for c in beam)
    assert len(prefs.style_cases()) == 2 * len(STYLES)
    assert len(prefs.filler()) == 2 * prefs.FILLER_PAIRS


def test_a_limited_style_subset_spans_every_style_before_repeating_one():
    first = prefs.style_cases(len(STYLES))
    assert sorted(c["style"] for c in first) == sorted(s.name for s in STYLES)
    assert prefs.style_cases(len(STYLES) + 1)[-1]["style"] == STYLES[0].name


class CountingAnswerer:
    """Stands in for the models in a test of the chunking logic only (the bench itself runs the real ones): each
    chunk takes ten seconds of the test's clock, and it records which questions it was asked."""

    def __init__(self, clock):
        self.clock, self.asked = clock, []

    def replies(self, cases):
        self.asked += [c["question"] for c in cases]
        self.clock.now += 10.0
        return {name: [f"{name} reply to {c['question']}" for c in cases] for name in chunks.CONDITIONS}


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_a_run_stopped_by_its_minutes_keeps_every_chunk_and_the_next_answers_only_what_is_missing(tmp_path):
    cases = chunks.interleave(prefs.prefeval_cases(4), prefs.beam_cases(3), prefs.style_cases(4))
    assert [c["set"] for c in cases[:3]] == ["prefeval", "beam", "styles"]  # a partial run spans every set
    clock = Clock()
    first, saved = CountingAnswerer(clock), []
    state = chunks.State(tmp_path)
    # 10 s a chunk, 25 s allowed: two chunks fit; a third, as long as the last, would end after the deadline
    done = chunks.answer_missing(state, cases, lambda: first, 25.0, lambda: saved.append(1), clock)
    assert not done and len(first.asked) == 2 * chunks.QUESTIONS_PER_CHUNK and len(saved) == 2
    on_disk = chunks.State(tmp_path)  # what a killed run leaves: every finished chunk, all four conditions each
    assert len(on_disk.data["replies"]) == 8
    assert all(set(r) == set(chunks.CONDITIONS) for r in on_disk.data["replies"].values())
    second = CountingAnswerer(clock)
    assert chunks.answer_missing(on_disk, cases, lambda: second, None, lambda: None, clock)
    assert second.asked == [c["question"] for c in cases[8:]]  # nothing answered twice
    assert set(chunks.State(tmp_path).data["replies"]) == {chunks.case_key(c) for c in cases}


def test_a_run_folder_refuses_another_model_in_one_line(tmp_path):
    state = chunks.State(tmp_path)
    state.claim("SmolLM2", "abc")
    state.save()
    with pytest.raises(SystemExit, match="another model"):
        chunks.State(tmp_path).claim("Qwen", "abc")


def test_the_results_file_keeps_the_other_models_runs(tmp_path):
    from bench.finetune import write_preferences
    out = tmp_path / "prefs.json"
    write_preferences(out, {"bench": "finetune-preferences"}, {"model": "A", "questions_answered": 4})
    write_preferences(out, {"bench": "finetune-preferences"}, {"model": "B", "questions_answered": 2})
    write_preferences(out, {"bench": "finetune-preferences"}, {"model": "A", "questions_answered": 8})
    runs = json.loads(out.read_text())["runs"]
    assert [(r["model"], r["questions_answered"]) for r in runs] == [("B", 2), ("A", 8)]


def test_the_adapter_a_run_folder_keeps_is_the_same_whatever_questions_are_asked_beside_the_styles():
    """A second run on the folder may ask more PrefEval and BEAM questions: the styles demonstrated, and so the
    adapter, do not change (the store's row ids do, and are not part of what the adapter was trained on)."""
    from core.finetune.dataset import build_training_set

    def training(prefeval, beam):
        cases = chunks.interleave(prefs.prefeval_cases(prefeval), prefs.beam_cases(beam),
                                  prefs.style_cases(len(STYLES)))
        return build_training_set(prefs.user_store(cases))
    few, more = training(2, 2), training(14, 14)
    assert [p.item_id for p in few.probes] != [p.item_id for p in more.probes]
    assert few.examples == more.examples and chunks.fingerprint(few) == chunks.fingerprint(more)
