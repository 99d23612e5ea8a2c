"""bench/pending_learning.py on a small store, and its row on run_all's page."""
from __future__ import annotations

import json

from bench import pending_learning, run_all


def test_the_bench_times_the_scan_and_the_index_on_one_file_and_run_all_judges_it(tmp_path, capsys):
    result = pending_learning.main(["--episodes", "2000", "--pending", "30", "--repeats", "3", "--reply-chars", "80"])
    assert json.loads(capsys.readouterr().out) == result
    assert result["before"]["found"] == result["after"]["found"] == 30
    assert result["before"]["median_ms"] > 0 and result["after"]["median_ms"] > 0
    assert any("SCAN" in step for step in result["before"]["plan"])  # the baseline really is the scan
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "pending_learning.json").write_text(json.dumps(result), encoding="utf-8")
    out = tmp_path / "BENCHMARKS.md"
    assert run_all.main(["--results", str(saved), "--saved-only", "--only", "pending_learning",
                         "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| waiting turns found"))
    assert f"| {result['after']['median_ms']} ms |" in row
    assert "| — |" not in row  # judged against its target: pass or miss, never left open
    assert "`python bench/pending_learning.py`" in page
