"""bench/run_all.py's page: one figure a row against its target, saved benches marked with their own commit and date,
missing results listed, nothing rerun with --saved-only, and the other sections of the page left alone."""
from __future__ import annotations

import json
import re

from bench import run_all
from bench.meta import stamp


def _save(folder, name: str, result: dict) -> None:
    (folder / f"{name}.json").write_text(json.dumps(result), encoding="utf-8")


def _rows(page: str) -> dict[str, list[str]]:
    """Table rows by their first cell: [label, figure, target, verdict, load, date]."""
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in page.splitlines()
             if line.startswith("| ") and not line.startswith("| benchmark")]
    return {c[0]: c for c in cells}


def _page(tmp_path, saved, only: str, existing: str | None = None) -> str:
    out = tmp_path / "BENCHMARKS.md"
    if existing is not None:
        out.write_text(existing, encoding="utf-8")
    assert run_all.main(["--results", str(saved), "--saved-only", "--only", only, "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _turn(p95: float, idle: float) -> dict:
    at_100k = {"overhead_with_query_embedding_ms": {"p50": 9, "p95": p95, "p99": 30}}
    return {**stamp("turn"), "sizes": {"100000": at_100k},
            "idle_pass_at_n": 100000, "idle_pass": {"total_s": idle}}


def test_saved_results_are_judged_against_their_targets(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    _save(saved, "turn", _turn(21.5, 71.5))
    _save(saved, "generate", {**stamp("generate"), "streaming": {"ratio": 0.981}})
    _save(saved, "startup", {**stamp("startup"), "engram_first_start": {"median_s": 1.2}})
    rows = _rows(_page(tmp_path, saved, "turn,generate,startup,finetune"))
    assert rows["turn at 100,000: p95 with the query's embedding"][1:4] == ["21.5 ms", "≤ 20 ms", "**miss**"]
    assert rows["consolidation + forgetting over 100,000"][1:4] == ["71.5 s", "≤ 60 s", "**miss**"]
    assert rows["streaming: Engram / plain mlx_lm tokens per second"][1:4] == ["0.981", "≥ 0.97", "pass"]
    assert rows["window shown, first start (empty folder)"][3] == "pass"
    assert rows["finetune"][1] == "not measured: no saved result"
    assert not (saved / "finetune.json").exists()  # --saved-only ran nothing


def test_every_row_has_one_figure_its_load_and_date_and_a_saved_bench_its_own_commit(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    _save(saved, "turn", _turn(18.0, 30.0))
    _save(saved, "generate", {**stamp("generate"), "commit": "abc1234", "streaming": {"ratio": 1.01}})
    page = _page(tmp_path, saved, "turn,generate")
    rows = _rows(page)
    for label, cells in rows.items():
        assert len(re.findall(r"\d+(?:\.\d+)?", cells[1])) == 1, (label, cells[1])
        assert re.fullmatch(r"\d+(\.\d+)?", cells[4]) and "UTC" in cells[5]
    assert rows["streaming: Engram / plain mlx_lm tokens per second"][5].startswith("*saved*, commit abc1234, ")
    assert "*saved*" not in rows["turn at 100,000: p95 with the query's embedding"][5]


def test_only_the_generated_part_of_the_page_is_rewritten(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    _save(saved, "turn", _turn(18.0, 30.0))
    existing = (f"# Benchmarks\n\n{run_all.BEGIN}\n| old row | 1 |\n{run_all.END}\n\n"
                "## End-to-end answers\n\nAnother helper's section, kept as it is.\n")
    page = _page(tmp_path, saved, "turn", existing)
    assert "| old row |" not in page and "turn at 100,000" in page
    assert page.endswith("## End-to-end answers\n\nAnother helper's section, kept as it is.\n")
    assert page.count(run_all.BEGIN) == page.count(run_all.END) == 1


def test_a_verdict_stays_open_when_a_figure_is_missing():
    turn = next(b for b in run_all.BENCHES if b.name == "turn")
    assert turn.rows({"sizes": {"100000": {}}})[0].verdict is None
    assert turn.rows(_turn(30.0, 10.0))[0].verdict is False
    locomo = next(b for b in run_all.BENCHES if b.name == "locomo")
    beaten = {"results": {"engram": {"overall": {"R@10": 0.70, "R@50": 0.95}},
                          "bm25": {"overall": {"R@10": 0.72, "R@50": 0.9}}, "dense": {"overall": {"R@10": 0.6}}}}
    assert locomo.rows(beaten)[0].verdict is False
    beaten["results"]["engram"]["overall"]["R@10"] = 0.8
    assert locomo.rows(beaten)[0].verdict is True
    assert run_all.parse_json('loading model\n{\n "a": 1\n}\n') == {"a": 1}
