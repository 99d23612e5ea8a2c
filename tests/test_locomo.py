"""The LoCoMo bench's reading and scoring on a tiny hand-made file in the LoCoMo format, and run_all's page."""
from __future__ import annotations

import json

import pytest

from bench import locomo, run_all

SAMPLE = [{
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Tom",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy called Biscuit last week!"},
            {"speaker": "Tom", "dia_id": "D1:2", "text": "Lovely. I started pottery classes on Monday."},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Look at my new bike", "blip_caption": "a red bicycle"},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Tom", "dia_id": "D2:1", "text": "My pottery teacher moved to Lisbon."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Biscuit chewed my running shoes."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ana's dog?", "answer": "Biscuit", "evidence": ["D1:1", "D2:02"],
         "category": 4},
        {"question": "When did Tom start pottery?", "answer": "May 2023", "evidence": ["D:1:2; D2:1"], "category": 2},
        {"question": "What colour is Ana's bike?", "answer": "red", "evidence": ["D1:3"], "category": 1},
        {"question": "What does Tom think of cats?", "adversarial_answer": "x", "evidence": [], "category": 5},
    ],
    "observation": {"must": "never be read"}, "session_summary": {"must": "never be read"},
}]


@pytest.fixture
def tiny_file(tmp_path):
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    return path


def test_evidence_ids_are_normalised_as_the_readme_says():
    assert locomo.normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D1:2,D1:3 D1:4"]) == frozenset(
        {"D8:6", "D9:17", "D11:26", "D30:5", "D1:2", "D1:3", "D1:4"})
    assert locomo.normalise_evidence(["", "none"]) == frozenset()


def test_loading_keeps_turn_order_dates_captions_and_skips_questions_without_evidence(tiny_file):
    (conv,) = locomo.load(tiny_file)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conv.turns[0].time == 1683554160.0 and conv.turns[1].time == conv.turns[0].time + 60
    assert "a red bicycle" in conv.turns[2].text and conv.turns[3].session == 2
    assert [q.category for q in conv.questions] == [4, 2, 1]
    assert conv.questions[1].evidence == frozenset({"D1:2", "D2:1"})


def test_recall_at_k_is_the_share_of_evidence_found_averaged_per_category():
    evidence = frozenset({"D1:1", "D2:2"})
    assert locomo.recall_at(["D1:1", "D1:2", "D2:2"], evidence, 1) == 0.5
    assert locomo.recall_at(["D1:1", "D1:2", "D2:2"], evidence, 3) == 1.0
    rows = [(4, "bm25", ["D1:1"], evidence), (4, "bm25", ["D2:2", "D1:1"], evidence),
            (2, "bm25", ["D9:9"], frozenset({"D1:2"}))]
    result = locomo.summarise(rows, [1, 2])["bm25"]
    assert result["single-hop"] == {"R@1": 0.5, "R@2": 0.75}
    assert result["temporal"] == {"R@1": 0.0, "R@2": 0.0}
    assert result["overall"] == {"R@1": pytest.approx(1 / 3, abs=1e-4), "R@2": 0.5}


def test_bm25_baseline_ranks_the_turn_with_the_rare_word_first():
    ranking = locomo.BM25(["I like tea", "the pottery class was fun", "tea and cake"]).rank("pottery")
    assert ranking[0] == 1


def test_the_bench_runs_end_to_end_on_a_tiny_file(tiny_file, embedder):
    result = locomo.run(tiny_file, [1, 5], embedder=embedder, log=lambda *_: None)
    assert result["questions"] == 3 and set(result["results"]) == {"engram", "bm25", "dense"}
    assert result["results"]["engram"]["overall"]["R@5"] == 1.0  # five turns: everything is in the top 5
    assert result["results"]["engram"]["single-hop"]["R@1"] == 0.5  # one of the two dog turns comes first
    assert "| engram | overall |" in locomo.table(result)


def test_run_all_shows_the_real_text_recall_rows_from_saved_json(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "recall-100k.json").write_text(json.dumps({
        "bench": "recall", "date": "2026-11-22 20:00 UTC", "load_average_1m_at_start": 0.5,
        "recall_with_embedding_ms": {"p50": 7.1, "p95": 9.2, "p99": 11.0}, "cold_pages": True,
        "cold_first_query_ms": {"runs": [80.0, 95.5], "median": 87.8}, "knn_recall_at_10_vs_exact": 0.991,
        "store": {"memories": 100000, "episodes": 10000}}), encoding="utf-8")
    out = tmp_path / "BENCHMARKS.md"
    assert run_all.main(["--results", str(saved), "--saved-only", "--only", "recall-100k", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "| recall at 100k: p95, memories + turns, the query's embedding included | 9.2 ms | ≤ 20 ms | pass |" in page
    assert "| recall at 100k: vector search recall@10 vs exact | 0.991 | ≥ 0.995 | **miss** |" in page
    assert "| recall at 100k: first query of a session, cold pages | 87.8 ms |" in page
    assert "`python bench/recall.py --n 100000 --queries 100 --json`" in page
