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


def test_a_files_pages_are_evicted_and_counted_without_touching_the_rest_of_the_cache(tmp_path):
    from bench import page_cache
    path = tmp_path / "file.bin"
    path.write_bytes(b"\1" * (64 * page_cache.PAGE))
    if not page_cache.evict(path):  # macOS: no posix_fadvise
        assert page_cache.resident_bytes(path) is not None
        return
    assert page_cache.resident_bytes(path) == 0
    with path.open("rb") as handle:
        handle.read(page_cache.PAGE)
    assert 0 < page_cache.resident_bytes(path) <= path.stat().st_size


def test_each_round_adds_and_imports_what_the_store_does_not_hold_yet(tmp_path):
    """`memory add` of a statement already held loads no embedder: the bench times a new one in every round."""
    facts = [cold.new_fact(i) for i in range(6)]
    assert len(set(facts)) == 6 and all(f.endswith(".") for f in facts)
    files = [cold.small_file(tmp_path, i).read_text(encoding="utf-8") for i in range(3)]
    assert len(set(files)) == 3 and all(len(text.splitlines()) == len(cold.FACTS) for text in files)


def test_on_a_store_each_verb_says_how_much_of_the_file_it_read(tmp_path):
    from core.memory.manage import MemoryManager
    from core.store.db import open_db
    from tests.fakes import HashEmbedder
    data = tmp_path / "data"
    db = open_db(data / "engram.db")
    MemoryManager(db, HashEmbedder()).add("Ana lives in Porto")
    db.close()
    reads = cold._store_reads(data, ["memory_list"], cold.verbs(str(data), "x", str(tmp_path / "none.txt")))
    if reads:  # empty where the platform cannot evict one file
        assert reads["memory_list"]["store_read_mb"] > 0 and reads["memory_list"]["cold_store_s"] > 0
