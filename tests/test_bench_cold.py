"""bench/cold.py on small inputs (real processes, the real embedder), and its row and the turn's headline on the
benchmarks page, so neither rots between the runs that produce docs/BENCHMARKS.md."""
from __future__ import annotations

import json

from bench import cold, run_all
from bench.meta import stamp


def test_the_cold_bench_times_whole_processes_beside_python_and_one_query_per_embedder():
    processes = cold.time_verbs(1, only=("help", "memory_list"))
    assert set(processes) == {"python_c_pass", "help", "memory_list"}
    for verb in ("help", "memory_list"):  # each verb against the interpreter's bare start, same round
        assert processes[verb]["median_s"] > processes["python_c_pass"]["median_s"] > 0
        assert processes[verb]["over_python_s"] > 0
    queries = cold.embed_queries("default", 5)
    assert len(queries["ms"]) == 5 and min(queries["ms"]) > 0 and queries["runtime"] in ("numpy", "mlx")


def test_the_timed_processes_cache_bytecode_as_an_install_does(monkeypatch):
    """A dev machine's PYTHONDONTWRITEBYTECODE would have each timed run compile every Engram module edited since
    its last .pyc (~40 ms of `--self-check`), a cost no installed copy pays."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert cold.wall("import sys; assert not sys.dont_write_bytecode, 'bytecode caching is off'") > 0


def test_the_cold_bench_times_the_first_reply_from_a_window_it_opens():
    """The real window in its own process, the tiny model chosen: a message sent as soon as the window shows
    streams a reply (the driver fails the run if no token comes), here as Engram installs by default: no torch."""
    first = cold.time_first_token(1, without_torch=True)
    assert first["median_s"] > 0 and first["model"].startswith("tiny")


def test_the_page_judges_every_verb_and_leads_the_turn_with_its_embedding(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    fast = {"median_s": 0.3}
    (saved / "cold.json").write_text(json.dumps({
        **stamp("cold"), "processes": {"python_c_pass": {"median_s": 0.02}, "help": {"median_s": 0.06},
                                       "memory_add": fast, "self_check": {"median_s": 1.4}},
        "embedder_load_s": {"default": {"median_s": 0.2}, "sentence_transformers": {"median_s": 3.5},
                            "lasting": {"median_s": 0.3}},
        "query_embed_ms": {"default": {"p50": 5.6, "p95": 6.0}, "sentence_transformers": {"p50": 6.1, "p95": 6.9},
                           "lasting": {"p50": 2.4, "p95": 3.1}, "default_runtime": "numpy",
                           "lasting_runtime": "onnx"},
        "window_shown_to_first_token_s": {"median_s": 1.7},
        "window_shown_to_first_token_without_torch_s": {"median_s": 0.9}}))
    at_100k = {"overhead_ms": {"p50": 9, "p95": 14, "p99": 16}, "recall_alone_ms": {"p50": 7, "p95": 11, "p99": 12},
               "overhead_with_query_embedding_ms": {"p50": 15, "p95": 21.5, "p99": 25}}
    (saved / "turn.json").write_text(json.dumps({
        **stamp("turn"), "sizes": {"100000": at_100k}, "idle_pass_at_n": 100000, "idle_pass": {"total_s": 30},
        "headline": {"n": 100000, "turn_p95_ms_with_query_embedding": 21.5, "embedder": "all-MiniLM-L6-v2 on numpy",
                     "target_ms": 20.0}}))
    out = tmp_path / "BENCHMARKS.md"
    assert run_all.main(["--from-json", str(saved), "--saved-only", "--only", "cold,turn", "--out", str(out)]) == 0
    rows = {line.split(" | ")[0][2:]: line for line in out.read_text().splitlines() if line.startswith("| ")}
    assert "| **miss** |" in rows["cold"] and "self check 1.4 s" in rows["cold"]  # one verb over 1 s
    assert "0.2 s (numpy) vs sentence-transformers 3.5 s" in rows["cold"]
    assert "the window's (onnx): load 0.3 s, a query p50/p95 2.4/3.1 ms" in rows["cold"]
    first_reply = "window shown → first streamed token (tiny model, fresh process) 1.7 s, without torch 0.9 s"
    assert first_reply in rows["cold"]
    # The overhead alone (14 ms) would pass; with the query's embedding the turn misses 20 ms.
    assert "**turn p95 with the query's embedding at N=100000: 21.5 ms**" in rows["turn"]
    assert "| **miss** |" in rows["turn"]
