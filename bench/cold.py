"""Cold paths: what a user waits for when a command starts from nothing. `python bench/cold.py [--repeats 5]`.

1. Whole-process wall time of every verb group a user or a script runs (`--help`, `doctor`, `forget --preview`,
   `jobs list`, `models list`, `hypotheses`, `goals`, `finetune status`, `recall-weights`, `clients list`,
   `import list`, `memory add/show/list/search`, `import memories` of a small file), each round beside
   `python -c pass` (the interpreter's own start), so a busy machine slows both: on a fresh folder, then on a copy
   of bench/realstore.py's store of --store-n real-text memories (100,000). Medians of --repeats rounds; then one
   round on cold pages (the page cache dropped before each process, as after a reboot; `cold_pages_s`) where the
   machine lets the bench drop it (root on Linux; --no-cold-round skips it). On the store, also each verb's CPU
   time (cpu_median_s: what a busy machine inflates least) and, in one more round with only engram.db evicted from
   the page cache (bench/page_cache.py), how many MB of the store it read (store_read_mb, the kernel's readahead
   included) and its wall time so (cold_store_s). --store-only and --only VERB... narrow the run.
   `--self-check` runs on the fresh folder only, twice: as this
   checkout is installed (the tests' torch is here) and as Engram is installed without the `st` extra.
2. Embedder import + load, each in a fresh process: the default (the torch-free BERT) and sentence-transformers.
3. One new query's embedding, p50/p95 over distinct queries (no cache hits), each embedder in its own process,
   the two alternating.
4. The first reply from a cold start: the real window (offscreen) in a fresh process with the tiny test model
   (models/testing.py) chosen; a message is sent on the event loop's first turn after the window is shown, as a
   user who types at once, and the time to the first streamed token is taken where the chat panel receives it.
   The embedder and the model load from the moment the window is shown, so this is the wait they leave. Timed
   twice, like `--self-check`: as this checkout is installed (the tests' torch present) and as Engram installs by
   default and bundles (torch unavailable).
Prints JSON; the target is ≤ 1 s for every verb on an idle core.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 1.0
WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; "  # as installed without the `st` extra
# default: what a CLI verb loads; lasting: what the window and `engram chat` load (onnxruntime here, on a Mac mlx.nn)
LOAD = {"default": "from models.embeddings import load_embedder; load_embedder()",
        "lasting": "from models.embeddings import load_embedder; load_embedder(lasting=True)",
        "sentence_transformers": "from models.embeddings import load_sentence_transformer; "
                                 "load_sentence_transformer()"}
FACTS = ("Ana's dog is called Biscuit.", "Ana lives in Lisbon and works as a nurse.",
         "Ana drinks green tea every morning.", "Ana's sister Marta visits every August.")


ENTRY = "import sys; from app.__main__ import main; raise SystemExit(main(sys.argv[1:]))"


def verbs(data: str, fact: str, small_file: str) -> dict[str, tuple[str, list[str]]]:
    """Each verb a user or a script runs, as (code, argv) for `python -c CODE ARGV`: the real entry point."""
    on = lambda *words: (ENTRY, ["--data-dir", data, *words])  # noqa: E731
    return {"help": (ENTRY, ["--help"]),
            "doctor": on("doctor"), "forget_preview": on("forget", "--preview"), "jobs_list": on("jobs", "list"),
            "models_list": on("models", "list"), "hypotheses": on("hypotheses", "list"),
            "goals": on("goals", "list"), "finetune_status": on("finetune", "status"),
            "recall_weights": on("recall-weights"), "clients_list": on("clients", "list"),
            "import_list": on("import", "list"),
            "memory_add": on("memory", "add", fact),
            "memory_show": on("memory", "show", "1"),
            "memory_list": on("memory", "list"),
            "memory_search": on("memory", "search", "what is the dog's name"),
            "import_small_file": on("import", "memories", small_file)}


def new_fact(round_index: int) -> str:
    """A fact the store does not hold yet in every round: `memory add` embeds and writes it (a statement already
    remembered only raises its confidence, and loads no embedder)."""
    return f"{FACTS[round_index % len(FACTS)].rstrip('.')} (told on day {round_index})."


def small_file(folder: Path, round_index: int) -> Path:
    """A list of four memories new in this round, so every round's import embeds and writes them."""
    path = folder / f"memories-{round_index}.txt"
    if not path.exists():
        path.write_text("".join(f"{fact.rstrip('.')} (imported on day {round_index}).\n" for fact in FACTS),
                        encoding="utf-8")
    return path


SELF_CHECKS = {"self_check": (ENTRY, ["--self-check"]),
               "self_check_without_torch": (WITHOUT_TORCH + ENTRY, ["--self-check"])}


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every timed process: offline, this checkout first, and bytecode cached as an install has
    it (pip compiles at install time); PYTHONDONTWRITEBYTECODE, set on some dev machines, would have every run
    compile each Engram module changed since its last .pyc was written (~40 ms of `--self-check`)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def wall(code: str, argv: list[str] | None = None) -> float:
    return timed(code, argv)[0]


def timed(code: str, argv: list[str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: the process's user + system time, which a busy machine inflates far less)."""
    env = child_env(QT_QPA_PLATFORM="offscreen")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *(argv or [])], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv or code[:60]} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _summary(times: list[float]) -> dict:
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "max_s": round(max(times), 3)}


def time_verbs(repeats: int, store: Path | None = None, only: tuple[str, ...] | None = None, *,
               cold_round: bool = False) -> dict:
    """Each round runs `python -c pass` and then each verb once, on an empty folder or a copy of `store` (a data
    folder); medians over the rounds, of wall and of CPU time. On the store, one round with only the store's
    pages evicted (store_read_mb: how much of the file the verb brought into the cache, readahead included;
    cold_store_s). Then one round on cold pages (the kernel's whole page cache dropped before each process, as
    after a reboot), if this machine lets the bench drop it."""
    from bench.recall import drop_page_cache
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data"
        if store is not None:
            from bench.realstore import RealStore
            RealStore(store, 0, 0).copy_to(data)
        commands = lambda i: {**verbs(str(data), new_fact(i), str(small_file(Path(folder), i))),  # noqa: E731
                              **({} if store is not None else SELF_CHECKS)}
        names = [n for n in commands(0) if only is None or n in only]
        runs: dict[str, list[float]] = {"python_c_pass": [], **{n: [] for n in names}}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for round_index in range(repeats):
            for name in runs:
                seconds, cpu_seconds = timed(*(("pass", None) if name == "python_c_pass"
                                               else commands(round_index)[name]))
                runs[name].append(seconds)
                cpu[name].append(cpu_seconds)
        store_reads = _store_reads(data, names, commands(repeats + 1)) if store is not None else {}
        cold: dict[str, float] = {}
        for name in ["python_c_pass", *names] if cold_round else []:
            if not drop_page_cache():
                break
            cold[name] = round(wall(*(("pass", None) if name == "python_c_pass" else commands(repeats)[name])), 3)
    baseline = statistics.median(runs["python_c_pass"])
    out = {name: {**_summary(times), "cpu_median_s": round(statistics.median(cpu[name]), 3)}
           for name, times in runs.items()}
    for name, read in store_reads.items():
        out[name].update(read)
    for name in names:
        out[name]["over_python_s"] = round(out[name]["median_s"] - baseline, 3)
    for name, seconds in cold.items():
        out[name]["cold_pages_s"] = seconds
    return out


def _store_reads(data: Path, names: list[str], commands: dict) -> dict[str, dict[str, float]]:
    """Per verb, with the store's own pages evicted first (bench/page_cache.py: that file only, no root): the MB of
    engram.db in the page cache after it ran, and its wall time. Empty where the platform cannot evict a file."""
    from bench import page_cache
    files = [data / name for name in ("engram.db", "engram.db-wal")]
    out = {}
    for name in names:
        present = [f for f in files if f.exists()]
        if not all(page_cache.evict(f) for f in present):
            return {}
        seconds = wall(*commands[name])
        resident = [page_cache.resident_bytes(f) for f in present if f.exists()]
        if any(r is None for r in resident):
            return {}
        out[name] = {"store_read_mb": round(sum(r or 0 for r in resident) / 2**20, 1),
                     "cold_store_s": round(seconds, 3)}
    return out


def time_loads(repeats: int) -> dict:
    """Import + load of each embedder, timed inside a fresh process (its interpreter start left out)."""
    env = child_env()
    runs: dict[str, list[float]] = {name: [] for name in LOAD}
    for _ in range(repeats):
        for name, code in LOAD.items():
            done = subprocess.run([sys.executable, "-c", f"import time; t = time.perf_counter(); {code}; "
                                   "print(time.perf_counter() - t)"], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=600, check=True)
            runs[name].append(float(done.stdout.strip().splitlines()[-1]))
    return {name: _summary(times) for name, times in runs.items()}


def time_queries(count: int, rounds: int = 2) -> dict:
    """One new message at a time, as a turn embeds it. Each embedder runs alone in its own process, taking
    turns: side by side in one process their BLAS and OpenMP thread pools spin against each other."""
    times: dict[str, list[float]] = {name: [] for name in LOAD}
    runtimes: dict[str, str] = {}
    for _ in range(rounds):
        for name in LOAD:
            env = child_env()
            done = subprocess.run([sys.executable, str(Path(__file__)), "--embed-only", name, "--queries",
                                   str(count)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                                  check=True)
            result = json.loads(done.stdout)
            times[name] += result["ms"]
            runtimes[name] = result["runtime"]
    out: dict = {name: {f"p{p}": round(float(np.percentile(t, p)), 2) for p in (50, 95, 99)}
                 for name, t in times.items()}
    out["default_runtime"], out["lasting_runtime"] = runtimes.get("default", "?"), runtimes.get("lasting", "?")
    return out


def embed_queries(name: str, count: int) -> dict:
    """In this process: `count` distinct queries (no cache hits) through one embedder, after a short warm-up."""
    from models import embeddings
    embedder = (embeddings.load_sentence_transformer() if name == "sentence_transformers"
                else embeddings.load_embedder(lasting=name == "lasting"))
    queries = [f"What did my sister say about the trip to Lisbon, message {i}?" for i in range(count + 10)]
    times = []
    for index, query in enumerate(queries):
        started = time.perf_counter()
        embedder.embed([query])
        if index >= 10:  # the first few warm the allocator and the tokenizer
            times.append((time.perf_counter() - started) * 1000)
    return {"ms": times, "runtime": getattr(embedder, "backend", "sentence-transformers")}


FIRST_TOKEN_DRIVER = """
import json, os, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

marks = {}

def _report(outcome):
    print("FIRST_TOKEN " + json.dumps({**marks, "outcome": outcome}), flush=True)
    os._exit(0)  # the throw-away data folder needs no orderly close; learning may have begun on the model lane

def _ask(app):
    marks["shown"] = time.perf_counter()
    window = next(w for w in app.topLevelWidgets() if hasattr(w, "show_panel") and w.isVisible())
    panel = window.show_panel("chat")
    def chunk(text):
        if text and "first_token" not in marks:
            marks["first_token"] = time.perf_counter()
    panel.turns.chunk.connect(chunk)
    panel.turns.failed.connect(lambda message, _no_model: _report("failed: " + message))
    panel.turns.finished.connect(lambda *_: _report("finished"))
    panel.send(%(question)r)

_exec = QApplication.exec
def _exec_and_ask(*_args):
    app = QApplication.instance()
    QTimer.singleShot(0, lambda: _ask(app))
    QTimer.singleShot(300_000, lambda: _report("timed out"))
    return _exec()
QApplication.exec = _exec_and_ask
from app.__main__ import main
sys.exit(main([]))
"""
QUESTION = "What is my dog called?"


def time_first_token(repeats: int, *, without_torch: bool = False) -> dict:
    """Window shown → first streamed token of the first reply, each run a fresh process on a fresh data folder."""
    driver = (WITHOUT_TORCH if without_torch else "") + FIRST_TOKEN_DRIVER % {"question": QUESTION}
    from models.testing import build_tiny_model
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_model(Path(folder) / "tiny-4bit")
        for index in range(repeats):
            home = Path(folder) / f"home-{index}"
            home.mkdir()
            (home / "settings.json").write_text(json.dumps({"chat_model": str(model), "onboarding_seen": True}),
                                                encoding="utf-8")
            env = child_env(QT_QPA_PLATFORM="offscreen", ENGRAM_HOME=str(home))
            done = subprocess.run([sys.executable, "-c", driver], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=600)
            line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST_TOKEN ")), None)
            report = json.loads(line[len("FIRST_TOKEN "):]) if line else {"outcome": done.stderr.strip()[-300:]}
            if "first_token" not in report:
                raise RuntimeError(f"no streamed token from the window: {report['outcome']}")
            runs.append(report["first_token"] - report["shown"])
    return {**_summary(runs), "model": "tiny 4-bit qwen2 (models/testing.py)", "question": QUESTION}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--store-n", type=int, default=100_000, help="also time the verbs on a copy of "
                        "bench/realstore.py's store of this many memories (0: only on an empty folder)")
    parser.add_argument("--verbs-only", action="store_true", help="skip the embedder and first-token parts")
    parser.add_argument("--store-only", action="store_true", help="time the verbs on the store only (not on an "
                        "empty folder); implies --verbs-only")
    parser.add_argument("--only", nargs="+", metavar="VERB", help="only these verbs (names as in the JSON)")
    parser.add_argument("--no-cold-round", action="store_true", help="skip the round on a dropped page cache (it "
                        "empties the whole machine's cache, which slows everything else running)")
    parser.add_argument("--embed-only", choices=sorted(LOAD), help=argparse.SUPPRESS)  # one side of step 3
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.embed_only:
        print(json.dumps(embed_queries(args.embed_only, args.queries)))
        return 0
    from bench.meta import stamp
    header = stamp("cold")
    only = tuple(args.only) if args.only else None
    cold_round = not args.no_cold_round
    processes = {} if args.store_only else time_verbs(args.repeats, only=only, cold_round=cold_round)
    store = None
    if args.store_n:
        from bench.realstore import build
        store = build(args.store_n, log=lambda *parts: print(*parts, file=sys.stderr, flush=True))
    on_store = time_verbs(args.repeats, store.folder, only, cold_round=cold_round) if store is not None else {}
    later = {}
    if not (args.verbs_only or args.store_only):
        later = {"embedder_load_s": time_loads(max(1, args.repeats // 2)), "query_embed_ms": time_queries(args.queries),
                 "window_shown_to_first_token_s": time_first_token(max(1, args.repeats // 2 + 1)),
                 "window_shown_to_first_token_without_torch_s":
                     time_first_token(max(1, args.repeats // 2 + 1), without_torch=True)}
    verdicts = [v["median_s"] <= TARGET_SECONDS for table in (processes, on_store) for k, v in table.items()
                if k != "python_c_pass"]
    print(json.dumps({**header, "target_s": TARGET_SECONDS, "processes": processes,
                      "store_n": args.store_n, "processes_on_store": on_store, **later,
                      "meets_target": all(verdicts)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
