"""Run the benchmarks in one go at one commit and write docs/BENCHMARKS.md: `python -m bench.run_all`.

Every bench below runs afresh, one after another, in one process tree, and its JSON is saved to bench/results.
A bench marked `saved` (a real-model bench too slow to rerun each time: generate, fine-tune, forgetting, learning,
answers) is not rerun: its last saved JSON is shown, and its row says "saved" with that run's commit and date
(`--rerun NAME` runs it too). `--model-lock FILE` runs the benches that load a real language model under
`flock FILE`. Only the part of docs/BENCHMARKS.md between the two `run_all` markers is rewritten; the sections
other benches' authors keep below it stay as they are. Run history belongs in bench/notes.md, not in the table.

Adding a bench: one `Bench` in BENCHES: its command, and a function from its JSON to rows (`Row`: a label, ONE
figure, the target, and the verdict: True, False or None when there is no target).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import code_version, load_average, machine  # noqa: E402

BEGIN = "<!-- bench/run_all.py writes from here: edit the Bench entries, not this table -->"
END = "<!-- bench/run_all.py writes up to here -->"


@dataclass(frozen=True)
class Row:
    label: str
    figure: str
    target: str = "—"
    verdict: bool | None = None


@dataclass(frozen=True)
class Bench:
    name: str  # also its file: bench/results/<name>.json
    command: list[str]  # arguments after `python`, run from the repository root
    rows: Callable[[dict], list[Row]]
    about: str = ""  # how the figure is taken, in a line
    saved: bool = False  # too slow to rerun each time: its saved JSON is shown
    model: bool = False  # loads a real language model: run under --model-lock
    details: Callable[[dict], str] = field(default=lambda r: "")


def get(result: dict, *path, default=None):
    for key in path:
        if not isinstance(result, dict) or key not in result:
            return default
        result = result[key]
    return result


def at_most(value, limit: float) -> bool | None:
    return None if not isinstance(value, (int, float)) else value <= limit


def at_least(value, limit: float) -> bool | None:
    return None if not isinstance(value, (int, float)) else value >= limit


def both(*verdicts: bool | None) -> bool | None:
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def num(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value if value is not None else "—")


def ms(value) -> str:
    return "—" if value is None else f"{value} ms"


def spread(r: dict, key: str) -> str:
    v = r.get(key) or {}
    return f"{v.get('p50', '—')}/{v.get('p95', '—')}/{v.get('p99', '—')} ms"


# -- the benches' rows ---------------------------------------------------------------------------------------

def recall_rows(size: str, p95_limit: float, overlap_limit: float) -> Callable[[dict], list[Row]]:
    def rows(r: dict) -> list[Row]:
        p95 = get(r, "recall_with_embedding_ms", "p95")
        overlap = r.get("knn_recall_at_10_vs_exact")
        cold = get(r, "cold_first_query_ms", "median")
        return [Row(f"recall at {size}: p95, memories + turns, the query's embedding included", ms(p95),
                    f"≤ {p95_limit:g} ms", at_most(p95, p95_limit)),
                Row(f"recall at {size}: vector search recall@10 vs exact", str(overlap), f"≥ {overlap_limit}",
                    at_least(overlap, overlap_limit)),
                Row(f"recall at {size}: first query of a session, "
                    f"{'cold pages' if r.get('cold_pages') else 'warm pages (could not drop the cache)'}",
                    ms(cold))]
    return rows


def recall_details(r: dict) -> str:
    store = r.get("store") or {}
    closeness = get(store, "composed_vs_real", "top10_overlap_composed_vs_real")
    return (f"{num(store.get('memories'))} memories + {num(store.get('episodes'))} turns, "
            f"{store.get('size_mb', '—')} MB; with the embedding p50/p95/p99 "
            f"{spread(r, 'recall_with_embedding_ms')}, "
            f"the embedding alone {spread(r, 'embed_query_ms')}, recall alone {spread(r, 'recall_ms')}, memories only "
            f"{spread(r, 'recall_memories_only_ms')}; vector search {spread(r, 'vector_knn_ms')} vs exact numpy "
            f"{spread(r, 'exact_numpy_one_thread_ms')}; cold first queries {get(r, 'cold_first_query_ms', 'runs')} ms"
            + (f"; composed vectors' top-10 overlap with whole-turn embeddings {closeness}" if closeness else ""))


def turn_rows(r: dict) -> list[Row]:
    rows = []
    for n, size in (r.get("sizes") or {}).items():
        p95 = get(size, "overhead_with_query_embedding_ms", "p95")
        target = "≤ 20 ms" if n == "100000" else "— (the target is at 100k)"
        rows.append(Row(f"turn at {int(n):,}: p95 with the query's embedding", ms(p95), target,
                        at_most(p95, 20.0) if n == "100000" else None))
    for n, why in (r.get("not_measured") or {}).items():
        rows.append(Row(f"turn at {int(n):,}: p95 with the query's embedding", f"not measured: {why}"))
    if "idle_pass" in r:
        total = get(r, "idle_pass", "total_s")
        rows.append(Row(f"consolidation + forgetting over {num(r.get('idle_pass_at_n'))}", f"{total} s", "≤ 60 s",
                        at_most(total, 60.0)))
    return rows


def turn_details(r: dict) -> str:
    return "; ".join(f"N={n}: overhead {spread(s, 'overhead_ms')}, recall alone {spread(s, 'recall_alone_ms')}, "
                     f"the query's embedding {spread(s, 'embed_query_ms')}, the episode's embedding after the reply "
                     f"{spread(s, 'episode_embed_after_reply_ms')}" for n, s in (r.get("sizes") or {}).items())


def turn_window_rows(r: dict) -> list[Row]:
    p95 = get(r, "window_wait_ms", "p95")
    return [Row(f"turn in the window at {num(r.get('n'))}: p95 Return → first token, minus the model's prefill",
                ms(p95), "≤ 20 ms", at_most(p95, 20.0)),
            Row("turn in the window: p95 last token → the turn stored and embedded",
                ms(get(r, "after_reply_ms", "p95")))]


def turn_window_details(r: dict) -> str:
    return (f"{r.get('turns')} turns, {r.get('model')}: Return → first token "
            f"{spread(r, 'return_to_first_token_ms')}, the model's own first token "
            f"{spread(r, 'model_first_token_ms')}, "
            f"the wait {spread(r, 'window_wait_ms')}; Return → prepared {spread(r, 'return_to_prepared_ms')}, of it "
            f"Assistant.prepare on the db lane {spread(r, 'prepare_on_db_lane_ms')}")


def _slowest(processes: dict) -> tuple[str, float | None]:
    timed = {k: v.get("median_s") for k, v in processes.items() if k != "python_c_pass"}
    if not timed:
        return "—", None
    name = max(timed, key=lambda k: timed[k])
    return name.replace("_", " "), timed[name]


def cold_rows(r: dict) -> list[Row]:
    rows = []
    for key, where in (("processes", "an empty folder"), ("processes_on_store", f"{num(r.get('store_n'))} memories")):
        if r.get(key):
            name, seconds = _slowest(r[key])
            rows.append(Row(f"CLI verbs, whole process, on {where}: the slowest median ({name})", f"{seconds} s",
                            "every verb ≤ 1 s", at_most(seconds, 1.0)))
    return rows


def cold_details(r: dict) -> str:
    parts = []
    for key, where in (("processes", "empty"), ("processes_on_store", "100k")):
        table = r.get(key) or {}
        parts.append(f"{where}: " + ", ".join(
            f"{k.replace('_', ' ')} {v.get('median_s')}"
            + (f" (cold {v['cold_pages_s']})" if "cold_pages_s" in v else "")
            for k, v in table.items()) + " s")
    return "; ".join(parts)


def startup_rows(r: dict) -> list[Row]:
    store = r.get("engram_on_store_with_real_model") or {}
    first = get(r, "engram_first_start", "median_s")
    rows = [Row("window shown, first start (empty folder)", f"{first} s", "≤ 2 s (goal 1.5 s)", at_most(first, 2.0))]
    if store:
        shown = store.get("window_shown_median_s")
        rows += [Row(f"window shown, {num(store.get('store_memories'))} memories, SmolLM2 chosen", f"{shown} s",
                     "≤ 2 s (goal 1.5 s)", at_most(shown, 2.0)),
                 Row(f"first token from launch, {num(store.get('store_memories'))} memories, SmolLM2",
                     f"{store.get('first_token_median_s')} s")]
    return rows


def startup_details(r: dict) -> str:
    store = r.get("engram_on_store_with_real_model") or {}
    return (f"an empty Qt window {get(r, 'baseline_empty_qt_window', 'median_s')} s; model chosen, empty folder "
            f"{get(r, 'engram_with_model_chosen', 'median_s')} s; on the store: window runs "
            f"{store.get('runs_window_shown_s')} s, "
            f"first token runs {store.get('runs_first_token_s')} s, cold pages {store.get('cold_pages_run')}")


def locomo_rows(r: dict) -> list[Row]:
    overall = {n: get(r, "results", n, "overall", default={}) for n in ("engram", "bm25", "dense")}
    at10 = overall["engram"].get("R@10")
    beats = None if at10 is None else all(at10 > (o.get("R@10") or 0) for n, o in overall.items() if n != "engram")
    return [Row("LoCoMo dev evidence R@10", str(at10), "≥ 0.75 and above BM25 and dense",
                both(at_least(at10, 0.75), beats)),
            Row("LoCoMo dev evidence R@50", str(overall["engram"].get("R@50")), "≥ 0.90",
                at_least(overall["engram"].get("R@50"), 0.90))]


def locomo_details(r: dict) -> str:
    return "; ".join(f"{n} R@10 {get(r, 'results', n, 'overall', 'R@10')}" for n in ("engram", "bm25", "dense")) + \
        f"; {r.get('wall_seconds')} s"


def answers_rows(r: dict) -> list[Row]:
    """bench/answers.py: each data set's score over every question per condition (F1 against the corrected answers
    on LoCoMo, the rubric proxy on BEAM), with Engram's evidence recall and seconds a question."""
    from bench.answers_summary import main_metric
    rows = []
    for dataset, groups in (r.get("summary") or {}).items():
        every = groups.get("all", {})
        engram = every.get("engram", {})
        metric = main_metric(engram, every=True)
        scores = ", ".join(f"{c} {every[c].get(metric)}" for c in r.get("conditions", []) if c in every)
        rows.append(Row(f"answers, {r.get('model')}, {dataset}: {engram.get('n')} questions ({metric})",
                        f"{scores}; evidence recall {engram.get('evidence_recall')}; "
                        f"{engram.get('seconds')} s a question", "Engram above no memory and truncated",
                        _beats_baselines(every, metric)))
    return rows


def _beats_baselines(every: dict, metric: str) -> bool | None:
    mine = every.get("engram", {}).get(metric)
    others = [every.get(c, {}).get(metric) for c in ("none", "truncated")]
    if mine is None or any(o is None for o in others):
        return None
    return all(mine > o for o in others)

BENCHES = (
    Bench("recall-100k", ["bench/recall.py", "--n", "100000", "--queries", "100", "--json"],
          recall_rows("100k", 20.0, 0.995),
          "a copy of the real-text store (bench/realstore.py); the data's own questions; recall as a turn runs it",
          details=recall_details),
    Bench("turn", ["bench/turn.py", "--turns", "60", "--cached-only", "--json"], turn_rows,
          "Assistant.prepare + finish + graph update with a scripted model, the query's embedding added",
          details=turn_details),
    Bench("cold", ["bench/cold.py", "--repeats", "3"], cold_rows,
          "each verb a fresh process through app.__main__.main, median of 3, then one round on cold pages",
          details=cold_details),
    Bench("recall-1m", ["bench/recall.py", "--n", "1000000", "--queries", "100", "--cached-only", "--json"],
          recall_rows("1M", 25.0, 0.98),
          "the same at 1,000,000 memories", details=recall_details),
    Bench("turn-window", ["bench/turn_window.py", "--turns", "6", "--json"], turn_window_rows,
          "the real window (offscreen) on the 100k store, the tiny test model, Return → the panel's first token",
          details=turn_window_details),
    Bench("startup", ["bench/startup.py", "--repeats", "2"], startup_rows,
          "launch → window shown (offscreen) → first streamed token",
          model=True, details=startup_details),
    Bench("locomo", ["bench/locomo.py", "--json"], locomo_rows, "evidence retrieval over LoCoMo dev's turns",
          details=locomo_details),
    Bench("graph", ["bench/graph.py"], about="the real main window's graph panel, offscreen",
          rows=lambda r: [Row("graph panel at 2,000 nodes: pan frame p95",
                                                      ms(get(r, "frame_ms", "pan", "p95")), "≤ 33 ms",
                                                      at_most(get(r, "frame_ms", "pan", "p95"), 33.0))]),
    Bench("pending_learning", ["bench/pending_learning.py"],
          about="the idle job's query for turns waiting to be learned",
          rows=lambda r: [Row("waiting turns found at 100k episodes, median", ms(get(r, "after", "median_ms")),
                              "≤ 1 ms", at_most(get(r, "after", "median_ms"), 1.0))]),
    Bench("generate", ["bench/generate.py"],
          lambda r: [Row("streaming: Engram / plain mlx_lm tokens per second", str(get(r, "streaming", "ratio")),
                         "≥ 0.97", at_least(get(r, "streaming", "ratio"), 0.97))], saved=True),
    Bench("finetune", ["bench/finetune.py"],
          lambda r: [Row("fine-tune: Engram / mlx_lm tokens per second", str(r.get("ratio")), "≥ 0.95",
                         at_least(r.get("ratio"), 0.95))], saved=True),
    Bench("finetune-gate", ["bench/finetune.py", "--gate"],
          lambda r: [Row("fine-tune gate on SmolLM2: accepts the good run, rejects the two bad ones",
                         "as expected" if r.get("as_expected") else "not as expected", "all three as expected",
                         r.get("as_expected"))], saved=True, model=True),
    Bench("forgetting", ["bench/forgetting.py", "--json"],
          lambda r: [Row("forgetting: learned / fixed wrongful forgets", str(r.get("wrongful_forgets_ratio")),
                         "≤ 0.5, store no larger", r.get("passed"))], saved=True),
    Bench("learning", ["bench/learning.py", "--model", "smollm2", "--limit", "12", "--save"],
          lambda r: [Row("learning: junk rate, worst model", str(max((run.get("junk_rate") or 0)
                                                                  for run in (r.get("runs") or {}).values())
                                                              if r.get("runs") else None),
                         "0 for every model",
                         all(run.get("junk_rate") in (0, None) for run in r["runs"].values())
                         if r.get("runs") else None)], saved=True, model=True),
    *(Bench(f"answers-{model}-{dataset}", ["bench/answers.py", "--model", folder, "--dataset", dataset,
                                             "--conversations", "3", "--limit", "5", "--context-tokens", "2048"],
            answers_rows, "questions asked as chat turns through the product's path; Engram against no memory, the "
            "truncated conversation and the gold evidence, same reader (bench/answers.py)", saved=True,
            model=model != "scripted-extractive")
      for model, folder, dataset in (("scripted-extractive", "scripted", "locomo"),
                                     ("scripted-extractive", "scripted", "beam"))),
)


# -- running and writing -------------------------------------------------------------------------------------

def parse_json(stdout: str) -> dict:
    """The JSON object a bench printed (the last top-level one; some print a log line before it)."""
    start = stdout.rfind("\n{")
    return json.loads(stdout[start + 1:] if start >= 0 else stdout[stdout.find("{"):])


def run_bench(bench: Bench, timeout: float, model_lock: Path | None, lock_wait: float = 600.0) -> dict:
    command = [sys.executable, *bench.command]
    if bench.model and model_lock is not None:  # waits at most lock_wait for the lock, then gives up
        command = ["flock", "-E", "75", "-w", str(int(lock_wait)), str(model_lock), *command]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if done.returncode == 75 and bench.model and model_lock is not None:
        raise RuntimeError(f"the model lock ({model_lock}) stayed busy for {int(lock_wait)} s")
    if done.returncode != 0:  # the error's last line: a table cell holds one line
        last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "no message")
        raise RuntimeError(f"{bench.name} failed ({done.returncode}): {last[-300:]}")
    result = parse_json(done.stdout)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    return result


def collect(benches: list[Bench], results_dir: Path, rerun: set[str], timeout: float,
            model_lock: Path | None, log, *, saved_only: bool = False) -> dict[str, dict]:
    results: dict[str, dict] = {}
    results_dir.mkdir(parents=True, exist_ok=True)
    for bench in benches:
        path = results_dir / f"{bench.name}.json"
        if saved_only or (bench.saved and bench.name not in rerun):
            results[bench.name] = ({**json.loads(path.read_text(encoding="utf-8")), "_saved": True}
                                   if path.exists() else {"error": "not measured: no saved result"})
            continue
        log(f"{time.strftime('%H:%M:%S')} running {bench.name}: python {' '.join(bench.command)}")
        try:
            results[bench.name] = run_bench(bench, timeout, model_lock)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            results[bench.name] = {"error": f"not measured: {str(exc)[:300]}"}
            continue
        path.write_text(json.dumps(results[bench.name], indent=1), encoding="utf-8")
    return results


VERDICT = {True: "pass", False: "**miss**", None: "—"}


def render(benches: list[Bench], results: dict[str, dict], header: dict) -> str:
    run = (f"Saved results rendered by `python -m bench.run_all --saved-only` at commit {header['commit']}, "
           f"{header['started']} UTC (nothing rerun: each row's date is its own run's)" if header.get("saved_only")
           else f"One run of `python -m bench.run_all` at commit {header['commit']}"
           f"{' with uncommitted changes' if header['changed'] else ''}, {header['started']} to {header['ended']} "
           f"(wall time {header['wall_minutes']} min)")
    lines = [BEGIN, "",
             f"{run}. Machine: {header['machine']}, shared with other work: the "
             "load is the 1-minute load average when each bench started (2 cores: above 2, it waited for a core). "
             "Rows marked *saved* were not rerun (a real-model bench too slow for every run): their own commit and "
             "date are shown. How each figure is taken: the details under the table; history: bench/notes.md.", "",
             "| benchmark | figure | target | verdict | load | date |", "|---|---|---|---|---|---|"]
    details = []
    for bench in benches:
        result = results.get(bench.name)
        if result is None:
            continue
        if "error" in result:
            lines.append(f"| {bench.name} | {result['error']} | — | — | — | — |")
            continue
        when = result.get("date", "—")
        if result.get("_saved") and bench.saved:
            when = f"*saved*, commit {result.get('commit', '?')}, {when}"
        for row in bench.rows(result):
            lines.append(f"| {row.label} | {row.figure} | {row.target} | {VERDICT[row.verdict]} "
                         f"| {result.get('load_average_1m_at_start', '—')} | {when} |")
        more = bench.details(result)
        details.append(f"- **{bench.name}** (`python {' '.join(bench.command)}`"
                       f"{', ' + str(result.get('wall_seconds')) + ' s' if 'wall_seconds' in result else ''}): "
                       f"{'. '.join(x for x in (bench.about, more) if x)}")
    lines += ["", "Details:", "", *details]
    if "results" in results.get("locomo", {}):
        from bench.locomo import table
        lines += ["", "LoCoMo evidence retrieval (dev split, 5 conversations):", "", table(results["locomo"])]
    return "\n".join(lines + ["", END])


def write_page(path: Path, generated: str) -> None:
    """Replace the generated part of the page, keeping everything outside the markers."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
    else:  # a page from before the markers: the generated part goes first
        before, after = "# Benchmarks\n\n", "\n\n" + text.split("\n", 1)[1]
    path.write_text(before + generated + after, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated bench names (the page then shows those alone)")
    parser.add_argument("--rerun", default="", help="comma-separated saved benches to run afresh too")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    parser.add_argument("--model-lock", type=Path, help="run the real-model benches under `flock` on this file")
    parser.add_argument("--saved-only", action="store_true", help="run nothing: render the saved results")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per bench")
    args = parser.parse_args(argv)
    benches = list(BENCHES)
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        benches = [b for b in benches if b.name in wanted]
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    version, started, clock = code_version(), time.gmtime(), time.perf_counter()
    load = load_average()
    results = collect(benches, args.results, {n for n in args.rerun.split(",") if n}, args.timeout,
                      args.model_lock, log, saved_only=args.saved_only)
    wall = (time.perf_counter() - clock) / 60
    header = {"commit": version["commit"], "changed": bool(version["uncommitted_source_files"]),
              "started": time.strftime("%Y-%m-%d %H:%M", started), "ended": time.strftime("%H:%M UTC", time.gmtime()),
              "wall_minutes": round(wall, 1), "machine": machine(), "load_at_start": load,
              "saved_only": args.saved_only}
    write_page(args.out, render(benches, results, header))
    if not args.saved_only:  # the last whole run's commit and wall time
        (args.results / "run_all.json").write_text(json.dumps(header, indent=1), encoding="utf-8")
    log(f"wrote {args.out} in {wall:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
