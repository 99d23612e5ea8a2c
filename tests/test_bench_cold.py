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


def test_the_page_names_the_slowest_verb_on_each_store(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "cold.json").write_text(json.dumps({
        **stamp("cold"), "store_n": 100000,
        "processes": {"python_c_pass": {"median_s": 0.02}, "help": {"median_s": 0.06},
                      "memory_add": {"median_s": 0.3}, "self_check": {"median_s": 0.9}},
        "processes_on_store": {"python_c_pass": {"median_s": 0.02}, "memory_search": {"median_s": 0.4},
                               "doctor": {"median_s": 1.4, "cold_pages_s": 2.5}}}))
    out = tmp_path / "BENCHMARKS.md"
    assert run_all.main(["--results", str(saved), "--saved-only", "--only", "cold", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert ("| CLI verbs, whole process, on an empty folder: the slowest median (self check) | 0.9 s "
            "| every verb ≤ 1 s | pass |") in page
    assert "on 100,000 memories: the slowest median (doctor) | 1.4 s | every verb ≤ 1 s | **miss** |" in page
    assert "doctor 1.4 (cold 2.5)" in page  # every verb's figure in the details
