"""bench/answers.py's plumbing on a tiny slice: its scores, its data readers, and a whole run through the product's
turn pipeline (real store, real embedder) with the scripted extractive reader and the tiny random-weight model,
the ingested store cached and reused."""
from __future__ import annotations

import json

import pytest

from bench import answers_score as scoring
from bench.answers import CONDITIONS, Reader, extractive_reply, run
from bench.answers_data import load_beam, load_locomo, spread
from bench.answers_store import StoreCache
from core.protocols import ChatMessage

LOCOMO_SAMPLE = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a pottery class yesterday with my sister."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Nice! I painted a lake sunrise last year."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "My dog Toby loves long walks by the river."},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "We camped at the beach with the kids last weekend."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "I started researching adoption agencies."},
        ],
    },
    "qa": [
        {"question": "What does Caroline's dog love?", "answer": "long walks by the river", "evidence": ["D1:3"],
         "category": 4},
        {"question": "Where did Melanie camp?", "answer": "the forest", "evidence": ["D2:1"], "category": 4},
        {"question": "What did Melanie paint?", "answer": "a lake sunrise", "evidence": ["D1:2"], "category": 1},
        {"question": "What is Caroline's favourite opera?", "adversarial_answer": "Carmen", "evidence": ["D1:1"],
         "category": 5},
    ],
}
AUDIT = [{"question_id": "locomo_0_qa1", "error_type": "HALLUCINATION", "correct_answer": "the beach",
          "correct_evidence": ["D2:1"]}]
BEAM_CHAT = [{"batch_number": 1, "time_anchor": None, "turns": [
    [{"role": "user", "id": 0, "time_anchor": "March-15-2024", "content": "My sprint ends on March 29. ->-> 1,1"},
     {"role": "assistant", "id": 1, "content": "Noted: the sprint ends on March 29."}],
    [{"role": "user", "id": 2, "content": "The dashboard API now averages 250ms after caching. ->-> 1,2"},
     {"role": "assistant", "id": 3, "content": "Great improvement."}]]}]
BEAM_QUESTIONS = {
    "knowledge_update": [{"question": "What is the dashboard API's response time?", "answer": "250ms",
                          "source_chat_ids": {"original_info": [2], "updated_info": [2]},
                          "rubric": ["LLM response should state: 250ms"]}],
    "abstention": [{"question": "What did my manager say about the launch?", "ideal_response": "No information.",
                    "rubric": ["Based on the provided chat, there is no information"]}],
    "event_ordering": [{"question": "In what order did I mention the sprint and the dashboard?",
                        "answer": "sprint, then dashboard", "source_chat_ids": [0, 2],
                        "rubric": ["1st: sprint ends March 29", "2nd: dashboard API 250ms"]}],
}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo-dev.json").write_text(json.dumps([LOCOMO_SAMPLE]))
    (tmp_path / "locomo" / "audit-dev.json").write_text(json.dumps(AUDIT))
    (tmp_path / "beam" / "1").mkdir(parents=True)
    (tmp_path / "beam" / "1" / "chat.json").write_text(json.dumps(BEAM_CHAT))
    (tmp_path / "beam" / "1" / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    return tmp_path


def test_locomo_f1_and_its_categories():
    assert scoring.token_f1("The long walks by the river", "long walks by the river") == 1.0
    assert scoring.token_f1("I don't know", "long walks") == 0.0
    assert scoring.locomo_f1("pottery, camping", "camping, pottery", "multi-hop") == 1.0
    assert scoring.locomo_f1("Psychology", "Psychology; counseling", "open-domain") == 1.0
    assert 0 < scoring.token_f1("walked by a river", "long walks by the river") < 1


@pytest.mark.parametrize("reply, says", [
    ("I don't know.", True), ("That is not mentioned in my notes.", True),
    ("I don’t have any information on that.", True),
    ("Could you tell me more?", True), ("Caroline's favourite opera is Carmen.", False), ("The beach.", False)])
def test_abstention_is_a_fixed_phrase_check(reply, says):
    assert scoring.abstains(reply) is says


def test_rubric_proxy_and_order():
    assert scoring.rubric_target("LLM response should state: 250ms") == "250ms"
    assert scoring.meets("It now averages about 250ms.", "LLM response should state: 250ms")
    assert not scoring.meets("It takes 400ms.", "LLM response should state: 250ms")
    rubric = ["1st: sprint ends March 29", "2nd: dashboard API 250ms"]
    assert scoring.order_score("First the sprint ending March 29.\nThen the dashboard API at 250ms.", rubric) == 1.0
    assert scoring.order_score("The dashboard API at 250ms.\nThe sprint ending March 29.", rubric) == 0.0
    assert scoring.order_score("Nothing relevant.", rubric) == 0.0


def test_readers_of_the_data(data):
    [conversation] = load_locomo(data / "locomo" / "locomo-dev.json", data / "locomo" / "audit-dev.json")
    assert conversation.turns[0].user == "Caroline: I went to a pottery class yesterday with my sister."
    assert conversation.turns[3].at > conversation.turns[2].at  # the second session's date
    camp = conversation.probes[1]
    assert (camp.answer, camp.corrected, camp.corrected_evidence) == ("the forest", "the beach", frozenset({"D2:1"}))
    assert conversation.probes[3].abstain and conversation.probes[3].answer == "Carmen"
    [beam] = load_beam(data / "beam")
    assert beam.turns[0].user == "My sprint ends on March 29." and beam.turns[0].ids == ("0", "1")
    assert {p.category for p in beam.probes if p.update} == {"knowledge_update"}
    assert [p.category for p in spread(conversation.probes, 3)] == ["single-hop", "multi-hop", "adversarial"]
    assert [p.category for p in spread(conversation.probes, 2, turn=1)] == ["multi-hop", "adversarial"]


def test_the_scripted_reader_answers_from_the_prompt_only():
    messages = [ChatMessage("system", "You are Engram.\n<<<MEMORIES\n[e3] user: Caroline: My dog Toby loves walks.\n"
                                      "MEMORIES>>>"), ChatMessage("user", "What does Caroline's dog love?")]
    assert extractive_reply(messages) == "user: Caroline: My dog Toby loves walks."
    assert extractive_reply([ChatMessage("user", "What opera?")]) == "I don't know."



def test_a_whole_run_with_the_scripted_reader_and_the_cache(data, tmp_path):
    from models.embeddings import load_embedder
    from tests.fakes import ScriptedChatModel
    embedder = load_embedder()
    cache = StoreCache(tmp_path / "cache")
    reader = Reader("scripted", ScriptedChatModel(extractive_reply), None)
    logged: list[str] = []
    result = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048, log=logged.append)
    assert result["learn"] == "patterns" and len(result["questions"]) == 4
    dog = result["questions"][0]
    assert set(CONDITIONS) <= set(dog)
    assert dog["gold"]["evidence_recall"] == 1.0 and dog["none"]["evidence_recall"] == 0.0
    assert dog["engram"]["evidence_recall"] == 1.0 and dog["engram"]["f1"] > 0.5  # recall found it, the reader read it
    assert dog["none"]["reply"] == "I don't know." and dog["truncated"]["evidence_recall"] == 1.0
    assert result["questions"][1]["gold"]["f1_corrected"] > result["questions"][1]["gold"]["f1"]  # the audit's answer
    assert result["summary"]["locomo"]["adversarial"]["none"]["correct"] == 1.0
    assert all(record[c]["seconds"] >= 0 for record in result["questions"] for c in CONDITIONS)
    again = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048, log=logged.append)
    assert any("reusing the ingested store" in line for line in logged)
    assert [q["engram"]["reply"] for q in again["questions"]] == [q["engram"]["reply"] for q in result["questions"]]
    assert len(list((tmp_path / "cache").glob("*.db"))) == 1


def test_a_beam_run_with_the_tiny_model(data, tmp_path, tiny_engine):
    from models.embeddings import load_embedder
    result = run(_dialogues(data, "beam"), Reader("tiny", tiny_engine, None), load_embedder(),
                 cache=StoreCache(tmp_path / "cache"), context_tokens=2048)
    by_category = {q["category"]: q for q in result["questions"]}
    assert set(by_category) == {"knowledge_update", "abstention", "event_ordering"}
    update = by_category["knowledge_update"]
    assert update["gold"]["evidence_recall"] == 1.0 and "correct" in update["engram"]
    assert "order" in by_category["event_ordering"]["gold"]
    assert "correct" in by_category["abstention"]["none"]
    assert all(isinstance(q[c]["reply"], str) for q in result["questions"] for c in CONDITIONS)
    assert set(result["summary"]["beam"]) >= {"knowledge_update", "abstention", "event_ordering", "all"}


def _dialogues(data, dataset):
    from bench.answers import load_dialogues
    return load_dialogues(dataset, data, 0)


def test_wrong_answers_are_sorted_by_cause():
    from bench.answers_summary import failure_causes

    def record(qid, engram, gold=None, abstain=False):
        return {"id": qid, "abstain": abstain, "engram": engram, "gold": gold or engram}
    records = [record("missed", {"f1_corrected": 0.0, "evidence_recall": 0.0, "abstained": False}),
               record("ignored", {"f1_corrected": 0.1, "evidence_recall": 1.0, "abstained": False},
                      gold={"f1_corrected": 1.0}),
               record("invented", {"correct": False, "abstained": False}, abstain=True),
               record("refused", {"f1_corrected": 0.0, "evidence_recall": 1.0, "abstained": True}),
               record("right", {"f1_corrected": 0.9, "evidence_recall": 1.0, "abstained": False})]
    found = failure_causes(records)
    assert found["examples"] == {"recall missed (evidence not all in the prompt)": ["missed"],
                                 "reader ignored the evidence in the prompt": ["ignored"],
                                 "invented where the conversation does not say": ["invented"],
                                 "said it does not know where the conversation says": ["refused"]}
    assert found["ignored_but_gold_right"] == 1


def test_a_run_cut_short_is_resumed_without_asking_again(data, tmp_path):
    """A hold on the model lock is short: a run stops asking at its time limit, and the next one keeps what the
    saved result answered (same settings) and asks only the rest."""
    import time

    from bench.answers import resumable
    from models.embeddings import load_embedder
    from tests.fakes import ScriptedChatModel
    embedder, cache = load_embedder(), StoreCache(tmp_path / "cache")
    asked: list[str] = []

    def reader_reply(messages):
        asked.append(messages[-1].content)
        return extractive_reply(messages)
    reader = Reader("scripted", ScriptedChatModel(reader_reply), None)
    stopped = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048,
                  stop_at=time.monotonic() - 1)
    assert stopped["complete"] is False and stopped["questions"] == [] and asked == []
    first = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048, limit=2,
                tag={"commit": "abc"})
    assert first["complete"] and {q[c]["commit"] for q in first["questions"] for c in CONDITIONS} == {"abc"}
    saved = tmp_path / "saved.json"
    settings = {"model": "scripted", "context_tokens": 2048}
    saved.write_text(json.dumps({**settings, "questions": first["questions"]}))
    assert resumable(saved, {**settings, "context_tokens": 4096}) == {}  # other settings: nothing kept
    done = resumable(saved, settings)
    asked.clear()
    whole = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048, done=done)
    assert whole["complete"] and whole["resumed"] == 2 and len(whole["questions"]) == 4
    assert len(asked) == 2 * len(CONDITIONS)  # only the two questions not answered before, in every condition
    half = {q["id"]: {k: v for k, v in q.items() if k not in CONDITIONS[1:]} for q in first["questions"]}
    asked.clear()
    rest = run(_dialogues(data, "locomo"), reader, embedder, cache=cache, context_tokens=2048, limit=2, done=half)
    assert len(asked) == 2 * (len(CONDITIONS) - 1)  # a question cut short keeps its answers and asks the rest
    assert rest["unfinished"] == 0 and [q["engram"] for q in rest["questions"]] == [q["engram"] for q in
                                                                                      first["questions"]]


def test_beams_mean_over_every_question_is_the_rubrics_and_event_orderings_row_is_its_tau():
    from bench.answers_summary import main_metric
    scores = {"n": 10, "rubric": 0.2, "order": 0.9, "evidence_recall": 0.3}
    assert main_metric(scores) == "order" and main_metric(scores, every=True) == "rubric"
    from bench.answers_summary import table
    partial = {"conditions": ["engram", "none"], "summary": {"beam": {"summarization": {
        "none": {"n": 1, "rubric": 0.25, "evidence_recall": 0.0, "seconds": 20.0}}}}}
    assert "| beam | summarization (rubric) | 0 | nan | 0.250 |" in table(partial)  # engram not answered yet
