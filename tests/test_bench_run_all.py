"""bench/run_all.py's page: each saved result judged against its target, missing results listed, nothing rerun."""
from __future__ import annotations

import json

from bench import run_all
from bench.meta import stamp


def _save(folder, name: str, result: dict) -> None:
    (folder / f"{name}.json").write_text(json.dumps(result), encoding="utf-8")


def _row(page: str, name: str) -> str:
    return next(line for line in page.splitlines() if line.startswith(f"| {name} |"))


def test_saved_results_are_judged_against_their_targets(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    _save(saved, "turn", {**stamp("turn"), "sizes": {
        "10000": {"overhead_ms": {"p50": 5, "p95": 9, "p99": 12}, "recall_alone_ms": {"p50": 4, "p95": 7, "p99": 9}},
        "100000": {"overhead_ms": {"p50": 11, "p95": 19, "p99": 30}, "recall_alone_ms": {"p50": 9, "p95": 15, "p99": 20}}},
        "idle_pass_at_n": 100000, "idle_pass": {"total_s": 71.5}})
    _save(saved, "generate", {**stamp("generate"), "streaming": {"ratio": 0.981, "engram_tokens_per_s": 10.7,
                                                               "plain_mlx_lm_tokens_per_s": 10.9},
                              "structured": {"vocab_size": 131072, "overhead_ms_per_token": 4.4,
                                             "grammar_processor_ms_per_token": 0.3}})
    _save(saved, "startup", {**stamp("startup"), "engram_first_start": {"median_s": 1.2},
                             "engram_with_model_chosen": {"median_s": 1.4}, "baseline_empty_qt_window": {"median_s": 0.5}})
    out = tmp_path / "BENCHMARKS.md"
    assert run_all.main(["--from-json", str(saved), "--saved-only", "--only", "turn,generate,startup,finetune",
                         "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "| **miss** |" in _row(page, "turn") and "71.5 s" in _row(page, "turn")  # the idle pass is over 60 s
    assert "| pass |" in _row(page, "generate") and "ratio 0.981" in _row(page, "generate")
    assert "| pass |" in _row(page, "startup") and "1.2 s (first start)" in _row(page, "startup")
    assert "not measured: no saved result yet" in _row(page, "finetune")
    assert not (saved / "finetune.json").exists()  # --saved-only ran nothing


def test_a_verdict_stays_open_when_a_figure_is_missing():
    turn = next(b for b in run_all.BENCHES if b.name == "turn")
    assert turn.passed({"sizes": {"100000": {"overhead_ms": {"p95": 20}}}}) is None
    assert turn.passed({"sizes": {"100000": {"overhead_ms": {"p95": 30}}}}) is False
    locomo = next(b for b in run_all.BENCHES if b.name == "locomo")
    beaten = {"results": {"engram": {"overall": {"R@10": 0.70, "R@50": 0.95}},
                          "bm25": {"overall": {"R@10": 0.72, "R@50": 0.9}}, "dense": {"overall": {"R@10": 0.6}}},
              "wall_seconds": 100}
    assert locomo.passed(beaten) is False
    beaten["results"]["engram"]["overall"]["R@10"] = 0.8
    assert locomo.passed(beaten) is True
