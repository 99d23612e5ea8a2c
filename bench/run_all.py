"""Run every benchmark in bench/ and write docs/BENCHMARKS.md: `python -m bench.run_all [--from-json DIR]`.

Each bench prints JSON. With --from-json DIR, a bench whose `<name>.json` is in DIR is not rerun: its saved
result is used (so the page can be regenerated without rerunning a 10-minute bench). Every fresh result is
saved to --save-json (default: the --from-json folder, else bench/results). With --saved-only nothing runs: a
bench without saved JSON is listed as not measured. Each row says pass, miss or — (no target or no figure).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
# modules, not benchmarks
HELPERS = {"__init__.py", "run_all.py", "synthetic.py", "embed_cache.py", "meta.py", "learning_gold.py",
           "answers_data.py", "answers_score.py", "answers_store.py", "answers_summary.py"}


@dataclass(frozen=True)
class Bench:
    name: str
    command: list[str]  # arguments after `python`, run from the repository root
    target: str
    summary: Callable[[dict], str]
    passed: Callable[[dict], bool | None] = lambda r: None  # None: no target to judge against


def _get(result: dict, *path, default="—"):
    for key in path:
        if not isinstance(result, dict) or key not in result:
            return default
        result = result[key]
    return result


def _recall_summary(r: dict) -> str:
    peer = r.get("peer_hnsw") or {}
    peer = (f"; peer {peer.get('library', '—')}: {_ms(peer, 'search_ms')}, recall@10 vs exact "
            f"{peer.get('recall_at_10_vs_exact', '—')}" if peer else "")
    exact = "exact_numpy_one_thread_ms" if "exact_numpy_one_thread_ms" in r else "exact_numpy_ms"
    data = f"{r['real_vectors']:,} real vectors of {r['n']:,}; " if "real_vectors" in r and "n" in r else ""
    return (f"{data}with the query's embedding (one message) p50/p95/p99 "
            f"{_ms(r, 'recall_with_embedding_ms')}; recall alone {_ms(r, 'recall_ms')}; the embedding alone "
            f"{_ms(r, 'embed_query_ms') if isinstance(r.get('embed_query_ms'), dict) else _get(r, 'embed_query_ms')}; "
            f"vector search {_ms(r, 'vector_knn_ms')}{_unpacked(r)}; exact numpy (one thread) {_ms(r, exact)}; "
            f"prefilter recall@10 vs exact {_get(r, 'knn_recall_at_10_vs_exact')}{peer}; ingest "
            f"{_get(r, 'ingest_rows_per_s')} rows/s; store {_get(r, 'store_mb_with_wal')} MB with its WAL")


def _unpacked(r: dict) -> str:
    """The same search before the upkeep clustered and packed the table (core.store.vectors.upkeep), same run."""
    if "vector_knn_unpacked_ms" not in r:
        return ""
    took = _get(r, "upkeep_s") if "upkeep_s" in r else _get(r, "pack_s")  # results written before the rename
    return (f" (before the upkeep, sqlite-vec's bit scan: {_ms(r, 'vector_knn_unpacked_ms')}, recall@10 vs exact "
            f"{_get(r, 'knn_unpacked_recall_at_10_vs_exact')}; the upkeep took {took} s)")


def _ms(r: dict, key: str) -> str:
    values = r.get(key) or {}
    return "/".join(str(values.get(p, "—")) for p in ("p50", "p95", "p99")) + " ms"


def _turn_size(n: str, size: dict) -> str:
    embed = size.get("embed_query_ms")
    embed = _ms(size, "embed_query_ms") if isinstance(embed, dict) else f"{embed} ms"
    cpu = f" (CPU time {_ms(size, 'overhead_cpu_ms')})" if "overhead_cpu_ms" in size else ""
    total = (f"; with the query's embedding {_ms(size, 'overhead_with_query_embedding_ms')}"
             if "overhead_with_query_embedding_ms" in size else "")
    return (f"N={n}: overhead p50/p95/p99 {_ms(size, 'overhead_ms')}{cpu}, recall alone "
            f"{_ms(size, 'recall_alone_ms')}, the query's embedding {embed} (not in the overhead){total}")


def _turn_summary(r: dict) -> str:
    parts = [_turn_size(n, size) for n, size in (r.get("sizes") or {}).items()]
    if "headline" in r:  # what a user waits for: the turn with its query's embedding
        parts.insert(0, f"**turn p95 with the query's embedding at N={_get(r, 'headline', 'n')}: "
                        f"{_get(r, 'headline', 'turn_p95_ms_with_query_embedding')} ms** "
                        f"({_get(r, 'headline', 'embedder')})")
    if "idle_pass" in r:
        parts.append(f"idle pass at N={r.get('idle_pass_at_n')}: {_get(r, 'idle_pass', 'total_s')} s")
    if "after_idle_pass" in r:
        parts.append(f"recall alone after it ({_get(r, 'after_idle_pass', 'active_memories')} memories left active): "
                     f"{_ms(r['after_idle_pass'], 'recall_alone_ms')}")
    return "; ".join(parts) or _flat(r)


def _generate_summary(r: dict) -> str:
    return (f"streaming Engram {_get(r, 'streaming', 'engram_tokens_per_s')} vs mlx_lm "
            f"{_get(r, 'streaming', 'plain_mlx_lm_tokens_per_s')} tokens/s, ratio {_get(r, 'streaming', 'ratio')}; "
            f"structured at a {_get(r, 'structured', 'vocab_size')}-token vocabulary: +"
            f"{_get(r, 'structured', 'overhead_ms_per_token')} ms/token end to end, grammar processor "
            f"{_get(r, 'structured', 'grammar_processor_ms_per_token')} ms/token"
            + (f"; first token of a next turn ({_get(r, 'next_turn_first_token', 'prompt_tokens')} prompt tokens): "
               f"Engram with its prompt cache {_get(r, 'next_turn_first_token', 'engram_with_prompt_cache_ms')} ms "
               f"vs plain mlx_lm {_get(r, 'next_turn_first_token', 'plain_mlx_lm_ms')} ms"
               if "next_turn_first_token" in r else ""))


def _startup_summary(r: dict) -> str:
    return (f"window shown after {_get(r, 'engram_first_start', 'median_s')} s (first start), "
            f"{_get(r, 'engram_with_model_chosen', 'median_s')} s (model chosen), medians; an empty Qt window: "
            f"{_get(r, 'baseline_empty_qt_window', 'median_s')} s")


def _graph_summary(r: dict) -> str:
    frame = r.get("frame_ms", {})
    empty = r.get("baseline_empty_plot_frame_ms", {})
    return (f"{_get(r, 'nodes')} nodes: pan p50/p95 {_get(frame, 'pan', 'p50')}/{_get(frame, 'pan', 'p95')} ms, "
            f"zoom {_get(frame, 'zoom', 'p50')}/{_get(frame, 'zoom', 'p95')} ms a frame; the empty plot "
            f"{_get(empty, 'pan', 'p50')}/{_get(empty, 'pan', 'p95')} ms; laid out and drawn in "
            f"{_get(r, 'layout_and_first_draw_s')} s")


def _at_most(value, limit: float) -> bool | None:
    return None if not isinstance(value, (int, float)) else value <= limit


def _all(*verdicts: bool | None) -> bool | None:
    """Missing figures leave the verdict open; any figure off target is a miss."""
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def _turn_passed(r: dict) -> bool | None:
    at_100k = _get(r, "sizes", "100000", default={})
    with_embedding = _get(at_100k, "overhead_with_query_embedding_ms", "p95")
    turn = (_at_most(with_embedding, 20.0) if "headline" in r
            else _at_most(_get(at_100k, "overhead_ms", "p95"), 25.0))  # results saved before the headline
    return _all(turn, _at_most(_get(r, "idle_pass", "total_s"), 60.0))


def _cold_summary(r: dict) -> str:
    processes = r.get("processes") or {}
    verbs = ", ".join(f"{name.replace('_', ' ')} {_get(v, 'median_s')} s" for name, v in processes.items()
                      if name != "python_c_pass")
    loads, queries = r.get("embedder_load_s") or {}, r.get("query_embed_ms") or {}
    return (f"whole process, medians: {verbs}; `python -c pass` {_get(processes, 'python_c_pass', 'median_s')} s. "
            f"Embedder import + load: {_get(loads, 'default', 'median_s')} s ({_get(queries, 'default_runtime')}) "
            f"vs sentence-transformers {_get(loads, 'sentence_transformers', 'median_s')} s; one query's "
            f"embedding p50/p95 {_get(queries, 'default', 'p50')}/{_get(queries, 'default', 'p95')} ms vs "
            f"{_get(queries, 'sentence_transformers', 'p50')}/{_get(queries, 'sentence_transformers', 'p95')} ms"
            f"{_lasting(loads, queries)}; window shown → first streamed token (tiny model, fresh process) "
            f"{_get(r, 'window_shown_to_first_token_s', 'median_s')} s" + _without_torch(r))


def _lasting(loads: dict, queries: dict) -> str:
    # The window's own embedder (results saved before it had one of its own have none).
    if "lasting" not in queries:
        return ""
    return (f"; the window's ({_get(queries, 'lasting_runtime')}): load {_get(loads, 'lasting', 'median_s')} s, "
            f"a query p50/p95 {_get(queries, 'lasting', 'p50')}/{_get(queries, 'lasting', 'p95')} ms")


def _without_torch(r: dict) -> str:
    # Results saved before the first reply was also timed as installed by default (no torch) have only one figure.
    seconds = _get(r, "window_shown_to_first_token_without_torch_s", "median_s", default=None)
    return "" if seconds is None else f", without torch {seconds} s"


def _cold_passed(r: dict) -> bool | None:
    processes = r.get("processes") or {}
    return _all(*(_at_most(_get(v, "median_s"), 1.0) for name, v in processes.items() if name != "python_c_pass"))


def _locomo_passed(r: dict) -> bool | None:
    overall = {name: _get(r, "results", name, "overall", default={}) for name in ("engram", "bm25", "dense")}
    at10 = {name: o.get("R@10") for name, o in overall.items()}
    if at10["engram"] is None:
        return None
    beats = all(at10["engram"] > (v or 0) for name, v in at10.items() if name != "engram")
    return _all(beats, at10["engram"] >= 0.75, _at_least(overall["engram"].get("R@50"), 0.90),
                _at_most(r.get("wall_seconds"), 600.0))


def _at_least(value, limit: float) -> bool | None:
    return None if not isinstance(value, (int, float)) else value >= limit


def _finetune_summary(r: dict) -> str:
    return (f"Engram {_get(r, 'engram_tokens_per_second')} vs mlx_lm {_get(r, 'mlx_lm_tokens_per_second')} "
            f"tokens/s, ratio {_get(r, 'ratio')}; whole-process wall time ratio {_get(r, 'wall_ratio')}")


def _finetune_preferences_summary(r: dict) -> str:
    """Per model: each set's preference-following score in the four conditions, beside the adapter's gate figures."""
    def one(run: dict) -> str:
        adapter = run.get("adapter", {})
        sets = "; ".join(f"{name} ({v.get('questions')} q) no memory {v.get('no_memory')}, memory {v.get('memory')}, "
                         f"adapter {v.get('adapter')}, adapter + memory {v.get('adapter_memory')}"
                         for name, v in (run.get("scores") or {}).items())
        ppl, known = adapter.get("general_ppl", {}), adapter.get("known_fact_loss", {})
        return (f"{run.get('model')}: adapter {adapter.get('status')} after {adapter.get('steps')} steps "
                f"({run.get('training_examples')} examples, styles {len(run.get('styles_learned') or [])}); {sets}; "
                f"plain-text ppl {_round(ppl.get('base'))} -> {_round(ppl.get('adapter'))}, known facts loss "
                f"{_round(known.get('base'))} -> {_round(known.get('adapter'))}")
    return " | ".join(one(run) for run in r.get("runs") or []) or _flat(r)


def _round(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def _finetune_gate_summary(r: dict) -> str:
    """Each run: the verdict and the three figures the gate decided on, base -> candidate."""
    def one(name: str, run: dict) -> str:
        base, new = run.get("baseline", {}), run.get("candidate", {})
        return (f"{name} (lr {run.get('learning_rate')}, {run.get('steps')} steps): {run.get('status')}; held-out "
                f"preference probes loss {base.get('probe_loss')} -> {new.get('probe_loss')}, plain-text ppl "
                f"{base.get('general_ppl')} -> {new.get('general_ppl')}, known facts loss "
                f"{base.get('known_fact_loss')} -> {new.get('known_fact_loss')}")
    return "; ".join(one(name, run) for name, run in (r.get("runs") or {}).items()) or _flat(r)


def _locomo_summary(r: dict) -> str:
    rows = []
    for retriever in ("engram", "bm25", "dense"):
        overall = _get(r, "results", retriever, "overall", default={})
        rows.append(f"{retriever} " + "/".join(f"{v:.3f}" for v in overall.values()))
    return f"R@{'/'.join(str(k) for k in r.get('k', []))}: " + "; ".join(rows) + f"; {_get(r, 'wall_seconds')} s"


def _forgetting_summary(r: dict) -> str:
    arms = r.get("arms", {})
    return "; ".join(f"{name}: wrongful forgets {_get(a, 'wrongful_forgets_per_month')}/month, recall of asked "
                     f"{_get(a, 'recall_of_asked')}, store {_get(a, 'store_size_end')} at the end "
                     f"(mean {_get(a, 'store_size_mean')})" for name, a in arms.items()) + \
        f"; ratio {_get(r, 'wrongful_forgets_ratio')}"


def _flat(r: dict, limit: int = 8) -> str:
    """The first few scalar figures of a result we have no special summary for."""
    items = [(k, v) for k, v in r.items() if isinstance(v, (int, float, str)) and k not in ("machine", "date")]
    return ", ".join(f"{k} {v}" for k, v in items[:limit])


def _learning_summary(r: dict) -> str:
    """Each model's run (bench/learning.py merges them into one file): facts, reconciliation, hypotheses."""
    def one(name: str, run: dict) -> str:
        return (f"{name} ({run.get('statements')} statements, {run.get('gold_facts')} gold facts): "
                f"{run.get('kept')} kept of what it proposed, {run.get('dropped')} dropped with a reason; precision "
                f"{run.get('precision')}, recall {run.get('recall')}, junk rate {run.get('junk_rate')}, "
                f"reconciliation accuracy {run.get('reconciliation_accuracy')}; {run.get('seconds_per_statement')} s "
                f"a statement; hypotheses {run.get('hypotheses', '—')} kept, {run.get('hypotheses_dropped', '—')} "
                f"dropped, precision {run.get('hypothesis_precision', '—')}, recall {run.get('hypothesis_recall', '—')}, "
                f"injected {run.get('hypotheses_injected', '—')}")
    return "; ".join(one(name, run) for name, run in (r.get("runs") or {}).items()) or _flat(r)


def _pending_learning_summary(r: dict) -> str:
    before, after = r.get("before") or {}, r.get("after") or {}
    return (f"{_get(r, 'episodes')} episodes ({_get(r, 'pending')} waiting, {_get(r, 'file_mb')} MB): the waiting "
            f"turns found in {_get(after, 'median_ms')} ms median (p95 {_get(after, 'p95_ms')}, first call "
            f"{_get(after, 'first_ms')}) through migration 7's index vs {_get(before, 'median_ms')} ms (p95 "
            f"{_get(before, 'p95_ms')}) by the JSON scan it replaced, same file: {_get(r, 'speedup')}x; migration 7 "
            f"took {_get(r, 'migration_seconds')} s, its backup included")


def _answers_summary(r: dict) -> str:
    """bench/answers.py: each data set's mean over every question, per condition (its main score: F1 corrected on
    LoCoMo, the rubric proxy on BEAM), Engram's evidence recall and seconds a question."""
    from bench.answers_summary import main_metric
    parts = []
    for dataset, groups in (r.get("summary") or {}).items():
        every = groups.get("all", {})
        metric = main_metric(every.get("engram", {}), every=True)
        scores = ", ".join(f"{c} {every[c].get(metric)}" for c in r.get("conditions", []) if c in every)
        parts.append(f"{r.get('model')} {dataset} ({every.get('engram', {}).get('n')} questions, {metric}): {scores}; "
                     f"evidence recall {every.get('engram', {}).get('evidence_recall')}")
    return "; ".join(parts) or _flat(r)


BENCHES = (
    Bench("recall-10k", ["bench/recall.py", "--n", "10000", "--json"],
          "none at 10k (recall alone p95 ≤ 5 ms is at 100k)",
          _recall_summary),
    Bench("recall-100k", ["bench/recall.py", "--n", "100000", "--json"],
          "recall alone p95 ≤ 5 ms; prefilter recall@10 ≥ 0.995",
          _recall_summary, lambda r: _all(_at_most(_get(r, "recall_ms", "p95"), 5.0),
                                          _at_least(_get(r, "knn_recall_at_10_vs_exact"), 0.995))),
    Bench("recall-1m", ["bench/recall.py", "--n", "1000000", "--real", "100000", "--json"],
          "100k real vectors + 900k noisy copies: recall alone p95 ≤ 25 ms; prefilter recall@10 ≥ 0.98",
          _recall_summary, lambda r: _all(_at_most(_get(r, "recall_ms", "p95"), 25.0),
                                          _at_least(_get(r, "knn_recall_at_10_vs_exact"), 0.98))),
    Bench("turn", ["bench/turn.py", "--json"],
          "turn p95 with the query's embedding ≤ 20 ms at 100k; consolidation + forgetting over 100k ≤ 60 s",
          _turn_summary, _turn_passed),
    Bench("cold", ["bench/cold.py"], "every verb ≤ 1 s, whole process", _cold_summary, _cold_passed),
    Bench("generate", ["bench/generate.py"], "streaming ratio ≥ 0.97", _generate_summary,
          lambda r: _at_least(_get(r, "streaming", "ratio"), 0.97)),
    Bench("finetune", ["bench/finetune.py"], "ratio ≥ 0.95 (tuner and wall time)", _finetune_summary,
          lambda r: _all(_at_least(r.get("ratio"), 0.95), _at_least(r.get("wall_ratio"), 0.95))),
    Bench("finetune-gate", ["bench/finetune.py", "--gate"],
          "SmolLM2-135M: the short run on preferences accepted, the too-high learning rate and the over-trained "
          "run rejected", _finetune_gate_summary, lambda r: r.get("as_expected")),
    Bench("finetune-preferences", ["bench/finetune.py", "--preferences"],
          "measured, no target: preference following without/with memory and adapter, deterministic checks",
          _finetune_preferences_summary),
    Bench("locomo", ["bench/locomo.py", "--json"], "R@10 ≥ 0.75 and > both baselines; R@50 ≥ 0.90; < 10 min",
          _locomo_summary, _locomo_passed),
    Bench("graph", ["bench/graph.py"], "pan and zoom frame p95 ≤ 33 ms at 2,000 nodes", _graph_summary,
          lambda r: _all(_at_most(_get(r, "frame_ms", "pan", "p95"), 33.0),
                         _at_most(_get(r, "frame_ms", "zoom", "p95"), 33.0))),
    Bench("forgetting", ["bench/forgetting.py", "--json"], "learned: wrongful forgets ≤ ½ of fixed, store no larger",
          _forgetting_summary, lambda r: r.get("passed")),
    Bench("learning", ["bench/learning.py", "--model", "smollm2", "--limit", "12", "--save"],
          "junk rate 0 for every model", _learning_summary,
          lambda r: all(run.get("junk_rate") in (0, None) for run in r["runs"].values()) if r.get("runs") else None),
    Bench("answers", ["bench/answers.py", "--model", "scripted", "--dataset", "locomo", "--conversations", "3",
                      "--limit", "5", "--context-tokens", "2048"],
          "measured, no target: Engram against no memory, the truncated conversation and the gold evidence (a real "
          "model: --model FOLDER, saved as bench/results/answers-<model>-<dataset>.json)", _answers_summary),
    Bench("startup", ["bench/startup.py"], "window within 2 s", _startup_summary,
          lambda r: _all(_at_most(_get(r, "engram_first_start", "median_s"), 2.0),
                         _at_most(_get(r, "engram_with_model_chosen", "median_s"), 2.0))),
    Bench("pending_learning", ["bench/pending_learning.py"],
          "the idle job's ask for waiting turns ≤ 1 ms median at 100k episodes", _pending_learning_summary,
          lambda r: _at_most(_get(r, "after", "median_ms"), 1.0)),
)


def discovered() -> list[Bench]:
    """The known benches, plus any other script in bench/ (run plainly, summarised generically)."""
    known = {b.command[0] for b in BENCHES}
    extra = [Bench(p.stem, [f"bench/{p.name}"], "—", lambda r: _flat(r))
             for p in sorted((ROOT / "bench").glob("*.py")) if p.name not in HELPERS and f"bench/{p.name}" not in known]
    return [b for b in BENCHES if (ROOT / b.command[0]).exists()] + extra


def parse_json(stdout: str) -> dict:
    """The JSON object a bench printed (the last top-level one; some print a log line before it)."""
    start = stdout.rfind("\n{")
    text = stdout[start + 1:] if start >= 0 else stdout[stdout.find("{"):]
    return json.loads(text)


def run_bench(bench: Bench, timeout: float) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *bench.command], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{bench.name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    result = parse_json(done.stdout)
    result.setdefault("wall_seconds", round(time.perf_counter() - started, 1))
    return result


def collect(benches: list[Bench], source: Path | None, save: Path, timeout: float, log, *,
            saved_only: bool = False) -> dict[str, dict]:
    results: dict[str, dict] = {}
    save.mkdir(parents=True, exist_ok=True)
    for bench in benches:
        saved = source / f"{bench.name}.json" if source else None
        if saved and saved.exists():
            results[bench.name] = json.loads(saved.read_text(encoding="utf-8"))
            continue
        if saved_only:
            results[bench.name] = {"error": "no saved result yet"}
            continue
        log(f"running {bench.name}: python {' '.join(bench.command)}")
        try:
            results[bench.name] = run_bench(bench, timeout)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            results[bench.name] = {"error": str(exc)[:300]}
            continue
        (save / f"{bench.name}.json").write_text(json.dumps(results[bench.name], indent=1), encoding="utf-8")
    return results


def render(benches: list[Bench], results: dict[str, dict], machine: str) -> str:
    lines = ["# Benchmarks", "",
             f"Generated by `python -m bench.run_all` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             f"Machine: {machine}. Shared with other work while measured: treat absolute times as upper bounds.",
             "Each bench measures its baseline in the same run; raw JSON sits next to the command that made it.", "",
             "| benchmark | result | target | verdict | measured | reproduce |", "|---|---|---|---|---|---|"]
    for bench in benches:
        result = results.get(bench.name)
        if result is None:
            continue
        figure = f"not measured: {result['error']}" if "error" in result else bench.summary(result)
        verdict = {True: "pass", False: "**miss**", None: "—"}[None if "error" in result else bench.passed(result)]
        when = result.get("date", "—")
        if result.get("commit"):
            when += f", commit {result['commit']}" + ("+changes" if result.get("uncommitted_source_files") else "")
        if "load_average_1m_at_start" in result:  # 2 cores: above 2, the bench shared them with other work
            when += f", load {result['load_average_1m_at_start']}"
        lines.append(f"| {bench.name} | {figure} | {bench.target} | {verdict} | {when} "
                     f"| `python {' '.join(bench.command)}` |")
    if "locomo" in results and "results" in results["locomo"]:
        from bench.locomo import table
        lines += ["", "## LoCoMo evidence retrieval (dev split, 5 conversations)", "", table(results["locomo"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-json", type=Path, help="reuse <bench>.json files found in this folder")
    parser.add_argument("--save-json", type=Path, help="where fresh results are saved")
    parser.add_argument("--only", help="comma-separated bench names to include")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    parser.add_argument("--notes", type=Path, default=ROOT / "bench" / "notes.md",
                        help="a Markdown file appended to the page (method, why a target is missed)")
    parser.add_argument("--saved-only", action="store_true", help="run nothing: a bench without saved JSON "
                        "is listed as not measured")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per bench")
    args = parser.parse_args(argv)
    benches = discovered()
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        benches = [b for b in benches if b.name in wanted]
    save = args.save_json or args.from_json or ROOT / "bench" / "results"
    reuse = args.from_json or (save if args.saved_only else None)  # --saved-only reads what was saved
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    results = collect(benches, reuse, save, args.timeout, log, saved_only=args.saved_only)
    sys.path.insert(0, str(ROOT))
    from bench.meta import machine
    page = render(benches, results, machine())
    if args.notes and args.notes.exists():
        page += "\n" + args.notes.read_text(encoding="utf-8")
    args.out.write_text(page, encoding="utf-8")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
