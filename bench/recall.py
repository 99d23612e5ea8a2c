"""Recall latency and quality at N memories: `python -m bench.recall --n 100000 [--queries 200] [--json]`.

Builds a fresh store of N synthetic memory sentences embedded with the real MiniLM, then times, for the
same queries in the same run:
  - what a user waits for: the query's embedding (one message at a time, nothing cached) plus Engram's recall of
    memories (k=10; vector prefilter + float rescoring, BM25, fusion, rescoring) — `recall_with_embedding_ms`;
  - its parts: the single-message embedding alone, and recall with the query's vector already cached;
  - that recall again with a blend learnt from the user's vetoes in place, read from the store as a turn reads it
    (core.memory.recall_learning: every memory candidate re-weighed) — `recall_learnt_blend_ms`;
  - the vector search alone (core.store.vectors.knn), after the upkeep an import ends with and the nightly job runs
    (core.store.vectors.upkeep: a table past 8,000 rows clustered, every partition packed into int8 codes by
    core.store.vector_packs; `upkeep_s`) and, just before it, with no packs (sqlite-vec's bit scan of the
    shards, or of the clusters a bulk write touched since the last upkeep) — `vector_knn_unpacked_ms`;
  - the exact baseline: numpy brute-force cosine over all N float vectors in memory, on one BLAS thread as
    SQLite runs on one (default BLAS threads fought the bench's own thread: 8.0 vs 0.47 ms at 10k in one run);
  - a peer: faiss's HNSW index (M=32, efSearch=64; built on 2 threads) over the same vectors, when faiss is installed
    (`pip install -e ".[bench]"`), with its own recall@10 against exact.
The store's size counts its WAL. A turn recalls episodes as well as memories: bench/turn.py measures that.
Embeddings are cached in --cache (a .npy per N) because embedding 100,000 sentences takes minutes on this CPU.
With --real R only the first R sentences are embedded; the other rows are copies of those vectors with gaussian
noise (σ = 0.02 a dimension, renormalised; the JSON says `real_vectors`), so a "1M" row is 100k real vectors plus
900k noisy copies, and the recall@10 figure on purely real embeddings is the one at N = R.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import load_average, stamp  # noqa: E402
from bench.synthetic import queries, sentences  # noqa: E402
from core.memory.recall import recall  # noqa: E402
from core.store import vectors  # noqa: E402
from core.store.db import open_db  # noqa: E402

K = 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "engram-bench-cache")
    parser.add_argument("--real", type=int, help="embed only this many sentences for real; later rows reuse "
                        "those vectors with a little noise (1M rows would take hours to embed on this CPU)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    result = run(args.n, args.queries, args.cache, real=args.real, log=(lambda *_: None) if args.json else _log)
    print(json.dumps(result, indent=1))
    return 0


def run(n: int, query_count: int, cache: Path, *, real: int | None = None, log=print) -> dict:
    from models.embeddings import load_embedder
    header = stamp("recall")
    embedder = load_embedder(lasting=True)  # the window's embedder: recall happens in the app
    texts = sentences(n)
    real = min(real or n, n)
    matrix, embed_rate = _embeddings(embedder, texts[:real], cache, log)
    if real < n:
        matrix = _jittered(matrix, n)
    asked = queries(query_count)
    embed_ms, query_vectors = _time(lambda q: _embed_uncached(embedder, q), asked)
    query_vectors = np.stack(query_vectors)
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "bench.db")
        ingest_rate = _ingest(db, embedder, texts, matrix, log)
        log("timing queries")
        with _one_blas_thread():
            exact_ms, exact_ids = _time(lambda v: _exact(matrix, v), query_vectors)
        unpacked_ms, unpacked_ids = _time(lambda v: [i - 1 for i, _ in vectors.knn(db, "memory", v, K)],
                                          query_vectors)  # sqlite-vec's bit scan of every partition
        started = time.perf_counter()
        vectors.upkeep(db)  # as an import ends (core.memory.manage) and the nightly upkeep does
        upkeep_s = time.perf_counter() - started
        knn_ms, knn_ids = _time(lambda v: [i - 1 for i, _ in vectors.knn(db, "memory", v, K)], query_vectors)
        full_ms, _ = _time(lambda q: recall(db, embedder, q, k=K, kinds=("memory",)),
                           asked, before=lambda q: _forget_query(embedder, q))
        recall_ms, _ = _time(lambda q: recall(db, embedder, q, k=K, kinds=("memory",)), asked)  # now cached
        learnt_ms = _time_learnt(db, embedder, asked)
        size_mb = sum(p.stat().st_size for p in Path(folder).glob("bench.db*")) / 1e6  # with its WAL and SHM
        db.close()
    peer = _peer_hnsw(matrix, query_vectors, exact_ids, log)
    return {
        **header, "n": n, "real_vectors": real, "queries": query_count, "k": K,
        "embedder": embedder.name, "embedder_class": type(embedder).__name__, "embed_sentences_per_s": embed_rate,
        "kinds": ["memory"], "recall_with_embedding_ms": _percentiles(full_ms),
        "embed_query_ms": _percentiles(embed_ms), "recall_ms": _percentiles(recall_ms),
        "recall_learnt_blend_ms": _percentiles(learnt_ms),
        "ingest_rows_per_s": round(ingest_rate, 1), "store_mb_with_wal": round(size_mb, 1),
        "vector_knn_ms": _percentiles(knn_ms), "exact_numpy_one_thread_ms": _percentiles(exact_ms),
        "knn_recall_at_10_vs_exact": round(_overlap(knn_ids, exact_ids), 4),
        "vector_knn_unpacked_ms": _percentiles(unpacked_ms),
        "knn_unpacked_recall_at_10_vs_exact": round(_overlap(unpacked_ids, exact_ids), 4),
        "upkeep_s": round(upkeep_s, 2), "peer_hnsw": peer,
        "load_average_1m_at_end": load_average(),
    }


def _time_learnt(db, embedder, asked: list[str]) -> list[float]:
    """Recall as a turn makes it once the user's vetoes have taught the blend (the weights 12 vetoes of word-only
    matches learnt in tests/test_recall_learning_store.py), the stored blend read on every query."""
    from core.config import Settings
    from core.memory import recall_learning
    with db.transaction():
        recall_learning.save(db, recall_learning.RecallBlend(weights=(0.07, -0.48, 0.0, 0.0, 0.0), vetoes=12))
    settings = Settings()
    timed, _ = _time(lambda q: recall(db, embedder, q, k=K, kinds=("memory",), settings=settings,
                                      blend=recall_learning.effective(db, settings)), asked)
    return timed


def _embeddings(embedder, texts: list[str], cache: Path, log) -> tuple[np.ndarray, float | None]:
    path = cache / f"synthetic-{embedder.name}-{len(texts)}.npy"
    if path.exists():
        log(f"embeddings from {path}")
        return np.load(path), None
    log(f"embedding {len(texts)} sentences (cached afterwards in {path})")
    started = time.perf_counter()
    matrix = embedder.embed(texts)
    rate = len(texts) / (time.perf_counter() - started)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix, round(rate, 1)


def _jittered(real: np.ndarray, n: int, noise: float = 0.02) -> np.ndarray:
    """n unit vectors: the real ones, then copies of them with gaussian noise (distinct, still sentence-like)."""
    rng = np.random.default_rng(3)
    extra = real[np.arange(len(real), n) % len(real)]
    extra = extra + rng.normal(0.0, noise, extra.shape).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.concatenate([real, extra.astype(np.float32)])


def _ingest(db, embedder, texts: list[str], matrix: np.ndarray, log, batch: int = 2000) -> float:
    """Rows and vectors through the store's own write path, in batches as an import would."""
    from core.store.memories import add_memory
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        with db.transaction():
            ids = [add_memory(db, text) for text in texts[start:start + batch]]
            vectors.upsert_vectors(db, "memory", ids, matrix[start:start + batch])
        if start % 20_000 == 0:
            log(f"ingested {start + len(ids)}")
    return len(texts) / (time.perf_counter() - started)


def _exact(matrix: np.ndarray, vector: np.ndarray) -> list[int]:
    similarity = matrix @ vector
    top = np.argpartition(-similarity, K)[:K]
    return [int(i) for i in top[np.argsort(-similarity[top])]]


def _embed_uncached(embedder, text: str) -> np.ndarray:
    _forget_query(embedder, text)
    return embedder.embed([text])[0]


def _forget_query(embedder, text: str) -> None:
    """Each query is a new message: drop it from the embedder's cache of repeated queries."""
    cache = getattr(embedder, "_cache", None)
    if cache is not None:
        cache.pop(text, None)


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # then the baseline runs on numpy's default threads, and the JSON cannot say otherwise
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _peer_hnsw(matrix: np.ndarray, query_vectors: np.ndarray, exact_ids: list[list[int]], log) -> dict | None:
    """faiss HNSW (inner product on unit vectors = cosine) over the same vectors, one thread, same queries."""
    try:
        import faiss
    except ImportError:
        return None
    faiss.omp_set_num_threads(2)  # building a million-row graph on one thread took 290 s here
    started = time.perf_counter()
    index = faiss.IndexHNSWFlat(matrix.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 40
    index.add(np.ascontiguousarray(matrix, dtype=np.float32))
    build_s = time.perf_counter() - started
    faiss.omp_set_num_threads(1)  # searched on one thread, as Engram's SQLite searches
    log(f"faiss HNSW built in {build_s:.0f} s")
    index.hnsw.efSearch = 64
    ms, found = _time(lambda v: [int(i) for i in index.search(v[None, :], K)[1][0]], query_vectors)
    return {"library": f"faiss {faiss.__version__} IndexHNSWFlat M=32 efConstruction=40 efSearch=64",
            "build_s": round(build_s, 1),
            "search_ms": _percentiles(ms), "recall_at_10_vs_exact": round(_overlap(found, exact_ids), 4)}


def _time(fn, items, before=None) -> tuple[list[float], list]:
    fn(items[0])  # warm-up: first-query page faults are not what a user waits for each turn
    times, outputs = [], []
    for item in items:
        if before is not None:
            before(item)
        started = time.perf_counter()
        outputs.append(fn(item))
        times.append((time.perf_counter() - started) * 1000)
    return times, outputs


def _percentiles(times: list[float]) -> dict[str, float]:
    p50, p95, p99 = np.percentile(times, [50, 95, 99])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "p99": round(float(p99), 2)}


def _overlap(found: list[list[int]], exact: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)]))


def _log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
