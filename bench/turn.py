"""Memory overhead of one chat turn, and one idle-time pass: `python -m bench.turn [--n 10000,100000] [--json]`.

For each N, a throw-away copy of bench/realstore.py's store of real conversational text (N memories recombined
from LoCoMo's and BEAM's sentences, N/10 earlier turns with their sentences' vectors, critical facts, Hebbian
edges; built once and cached outside the repository). The questions are the data's own (LoCoMo QA, BEAM probing
questions; every 10th asks about the critical facts). Then, per turn, through core.assistant.Assistant with a
scripted chat model (the model's own generation is not timed) that counts the prompt's tokens with a real chat
tokenizer, as the product does (`tokens_counted_with`):

  turn = prepare (the query's embedding, recall, critical facts, context assembly)
       + finish (episode row, reply attribution, access counts, co-activation)
       + graph update (Hebbian reinforcement of the reply's memories, as after a useful rating)

The message is new to the embedder (its cache is emptied of it), so prepare makes the query's embedding as the
window's turn does: on its own thread, while recall's full-text search reads the store. The query's embedding is
also timed alone just before each turn (embed_query_ms), and `overhead_ms` is the turn less that: the store's share
(an estimate where the two overlap). Reported next to it, measured in the same run: the episode's
embedding written after the reply (learn), recall alone on the same query (most of prepare; its vector cached), and
a baseline: a bare vector KNN of the same queries. The turn is also given as the process's CPU time, every thread's
(overhead_cpu_ms, the embedding's threads included): on a machine shared with other work that figure shows what the
wall time would be with a core to itself (the target is judged on wall time).
The headline is the turn's p95 at the largest N with the query's embedding in it (target ≤ 20 ms at 100k):
what a user waits for before the reply starts (bench/turn_window.py times the same turn through the window's lanes).
At --passes-at N it also times one consolidation pass and one
forgetting pass over the whole store (helper B2's core.memory.consolidate.consolidation_pass and
core.memory.forget.forgetting_pass), then recall of the same questions on the store those passes aged
(`after_idle_pass`: most memories archived).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import realstore, realtext  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402
from core.assistant import Assistant  # noqa: E402
from core.config import Settings  # noqa: E402
from core.memory import hebbian  # noqa: E402
from core.memory.index import index_episodes  # noqa: E402
from core.memory.recall import recall  # noqa: E402
from core.store import vectors  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.sessions import create_session  # noqa: E402
from tests.fakes import ScriptedChatModel  # noqa: E402

REPLY = "Here is a short answer about that, with one or two details you told me before."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100000,1000000", help="comma-separated store sizes")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--passes-at", type=int, default=100_000, help="the store size at which consolidation "
                        "and forgetting are timed (0: not timed)")
    parser.add_argument("--cached-only", action="store_true", help="skip a size whose store is not built yet")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    log = (lambda *_: None) if args.json else _log
    sizes = [int(s) for s in args.n.split(",") if s.strip()]
    result = run(sizes, args.turns, passes_at=args.passes_at, log=log, cached_only=args.cached_only)
    print(json.dumps(result, indent=1))
    return 0


def run(sizes: list[int], turns: int, *, passes_at: int = 100_000, log=print, cached_only: bool = False,
        cache: Path = realstore.CACHE) -> dict:
    from models.embeddings import load_embedder
    embedder = load_embedder(lasting=True)  # the window's embedder: the turn happens in a process that lasts
    count_tokens, counted_with = token_counter()
    result = {**stamp("turn"), "turns": turns, "tokens_counted_with": counted_with, "sizes": {}}
    for n in sizes:
        try:
            store = realstore.build(n, embedder=embedder, log=log, cached_only=cached_only, cache=cache)
        except realstore.NotBuilt as exc:
            result.setdefault("not_measured", {})[str(n)] = str(exc)
            continue
        with tempfile.TemporaryDirectory(prefix="engram-turn-") as folder:
            db = open_db(store.copy_to(Path(folder) / "data") / "engram.db")
            result["sizes"][str(n)] = {"store": {"memories": store.memories, "episodes": store.episodes,
                                                 "vectors": store.info().get("vectors")},
                                       **_time_turns(db, embedder, count_tokens, turns, log)}
            if n == passes_at:
                result["idle_pass_at_n"] = n
                result["idle_pass"] = _time_passes(db, embedder, log)
                result["after_idle_pass"] = _time_aged_recall(db, embedder, turns)
            db.close()
    measured = [int(n) for n in result["sizes"]]
    at = "100000" if "100000" in result["sizes"] else (str(max(measured)) if measured else None)
    if at:  # what a user waits for: the new message's embedding is part of the turn
        runtime = getattr(embedder, "backend", "sentence-transformers")
        result["headline"] = {"n": int(at), "target_ms": 20.0, "embedder": f"{embedder.name} on {runtime}",
                              "turn_p95_ms_with_query_embedding":
                                  result["sizes"][at]["overhead_with_query_embedding_ms"]["p95"]}
    result["load_average_1m_at_end"] = load_average()
    return result


def token_counter() -> tuple[Callable[[str], int], str]:
    """How the turn counts a prompt's tokens, as the product does (ChatEngine.count_tokens): a chat model's own
    tokenizer — the tests' real SmolLM2 when its package is installed, else the tiny test model's BPE."""
    from core.errors import ModelError
    from models.chat_tokenizer import load_tokenizer
    try:
        from models.testing_real import build_real_model
        tokenizer, name = load_tokenizer(build_real_model(q_bits=32)), "SmolLM2-135M-Instruct's tokenizer"
    except ModelError:
        from models.testing import build_tokenizer
        with tempfile.TemporaryDirectory(prefix="engram-turn-tokenizer-") as folder:
            build_tokenizer(Path(folder), 4096, corpus_lines=300)
            tokenizer, name = load_tokenizer(folder), "the tiny test model's tokenizer"  # read whole: folder may go
    return (lambda text: len(tokenizer.encode(text, add_special_tokens=False))), name


def _time_turns(db, embedder, count_tokens: Callable[[str], int], turns: int, log) -> dict:
    settings = Settings()
    chat = ScriptedChatModel([REPLY])
    chat.count_tokens = count_tokens  # the prompt's sections are counted as a chat model counts them
    assistant = Assistant(db, embedder, chat, None, settings)
    asked = realtext.questions(turns + 1, seed=23)
    asked[::10] = [f"Which antibiotic can I take for my cough, question {i}?" for i in range(len(asked[::10]))]
    query_vectors = embedder.embed(asked)
    session = create_session(db, "bench")
    rows = {"overhead": [], "overhead_cpu": [], "prepare": [], "finish": [], "graph": [], "episode_embed": [],
            "knn_baseline": [], "recall_alone": [], "embed_query": [], "with_embedding": []}
    for i, text in enumerate(asked):
        timing = _one_turn(db, embedder, assistant, session, text, query_vectors[i])
        if i == 0:
            continue  # warm-up
        for key, value in timing.items():
            rows[key].append(value)
    log(f"turn overhead p95 {np.percentile(rows['overhead'], 95):.1f} ms")
    used = db.scalar("SELECT avg(c) FROM (SELECT count(*) c FROM reply_memories GROUP BY episode_id)")
    return {"overhead_ms": _percentiles(rows["overhead"]), "overhead_cpu_ms": _percentiles(rows["overhead_cpu"]),
            "prepare_ms": _percentiles(rows["prepare"]),
            "finish_ms": _percentiles(rows["finish"]), "graph_update_ms": _percentiles(rows["graph"]),
            "recall_alone_ms": _percentiles(rows["recall_alone"]), "embed_query_ms": _percentiles(rows["embed_query"]),
            "overhead_with_query_embedding_ms": _percentiles(rows["with_embedding"]), "episode_embed_after_reply_ms":
            _percentiles(rows["episode_embed"]), "vector_knn_baseline_ms": _percentiles(rows["knn_baseline"]),
            "memories_per_reply": round(float(used or 0), 2)}


def _one_turn(db, embedder, assistant: Assistant, session: int, text: str, vector: np.ndarray) -> dict:
    embedder._cache.pop(text, None)  # noqa: SLF001 - a new message: its embedding is timed on its own,
    e0 = time.perf_counter()
    embedder.embed([text])
    e1 = time.perf_counter()
    embedder._cache.pop(text, None)  # noqa: SLF001 - and new again: the turn makes it, as the window's does
    c0, t0 = time.process_time(), time.perf_counter()
    prepared = assistant.prepare(session, text)
    c1, t1 = time.process_time(), time.perf_counter()
    reply = "".join(chunk.text for chunk in assistant.stream(prepared))
    c2, t2 = time.process_time(), time.perf_counter()
    record = assistant.finish(prepared, reply, "stop")
    t3 = time.perf_counter()
    hebbian.reinforce(db, record.used, assistant.settings.hebbian)
    c4, t4 = time.process_time(), time.perf_counter()
    index_episodes(db, embedder, [record.episode_id])
    t5 = time.perf_counter()
    vectors.knn(db, "memory", vector, assistant.settings.recall.k)
    t6 = time.perf_counter()
    recall(db, embedder, text, k=assistant.settings.recall.k, settings=assistant.settings, session_id=session)
    t7 = time.perf_counter()
    ms = 1000.0
    turn = ((t1 - t0) + (t4 - t2)) * ms
    embed = (e1 - e0) * ms
    return {"overhead": max(turn - embed, 0.0), "overhead_cpu": ((c1 - c0) + (c4 - c2)) * ms, "embed_query": embed,
            "with_embedding": turn, "prepare": (t1 - t0) * ms, "finish": (t3 - t2) * ms,
            "graph": (t4 - t3) * ms, "episode_embed": (t5 - t4) * ms, "knn_baseline": (t6 - t5) * ms,
            "recall_alone": (t7 - t6) * ms}


def _time_passes(db, embedder, log) -> dict:
    from core.memory.consolidate import consolidation_pass
    from core.memory.forget import forgetting_pass
    settings = Settings()
    started = time.perf_counter()
    consolidated = consolidation_pass(db, settings, embedder)
    consolidation_s = time.perf_counter() - started
    log(f"consolidation {consolidation_s:.1f} s")
    started = time.perf_counter()
    forgot = forgetting_pass(db, settings, embedder=embedder)
    forgetting_s = time.perf_counter() - started
    log(f"forgetting {forgetting_s:.1f} s")
    return {"consolidation_s": round(consolidation_s, 2), "forgetting_s": round(forgetting_s, 2),
            "total_s": round(consolidation_s + forgetting_s, 2), "target_total_s": 60.0,
            "summaries": consolidated.summaries, "similarity_edges": consolidated.similarity_edges,
            "made_permanent": consolidated.made_permanent, "scored": forgot.scored,
            "archived": len(forgot.archived), "compacted_episodes": len(forgot.compacted)}


def _time_aged_recall(db, embedder, turns: int) -> dict:
    """Recall of the turns' questions once the idle pass has archived most of the store (an aged store): rows
    forgetting archived are still ranked by both retrievers, and recall asks them again to fill its pools. The
    vector index is first kept up as the forgetting job does when it ends (vectors.upkeep): consolidation's bulk
    writes left some partitions unpacked."""
    vectors.upkeep(db)
    settings = Settings()
    asked = realtext.questions(turns + 1, seed=23)
    embedder.embed(asked)  # the queries' vectors cached: recall's own work is timed, as recall_alone_ms is
    session = create_session(db, "after the idle pass")
    times = []
    for text in asked:
        started = time.perf_counter()
        recall(db, embedder, text, k=settings.recall.k, settings=settings, session_id=session)
        times.append((time.perf_counter() - started) * 1000.0)
    active = db.scalar("SELECT count(*) FROM memories WHERE invalidated_at IS NULL AND forgotten_at IS NULL "
                       "AND deleted_at IS NULL")
    return {"active_memories": int(active or 0), "recall_alone_ms": _percentiles(times[1:])}


def _percentiles(times: list[float]) -> dict[str, float]:
    p50, p95, p99 = np.percentile(times, [50, 95, 99])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "p99": round(float(p99), 2)}


def _log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
