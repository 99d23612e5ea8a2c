"""Recall latency and quality at N memories: `python -m bench.recall --n 100000 [--queries 200] [--json]`.

Builds a fresh store of N synthetic memory sentences embedded with the real MiniLM, then times, for the
same queries in the same run:
  - Engram's recall (k=10; vector prefilter + float rescoring, BM25, fusion, rescoring), query vector cached;
  - the vector search alone (core.store.vectors.knn);
  - the exact baseline: numpy brute-force cosine over all N float vectors in memory.
and prints the vector search's recall@10 against the exact baseline. Embeddings are cached in --cache
(a .npy per N) because embedding 100,000 sentences takes minutes on this CPU. With --real R only the first R
sentences are embedded; the other rows get copies of those vectors with gaussian noise (the JSON says
`real_vectors`), so the recall@10 figure on purely real embeddings is the one at N = R.
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
    embedder = load_embedder()
    texts = sentences(n)
    real = min(real or n, n)
    matrix, embed_rate = _embeddings(embedder, texts[:real], cache, log)
    if real < n:
        matrix = _jittered(matrix, n)
    asked = queries(query_count)
    started = time.perf_counter()
    query_vectors = embedder.embed(asked)
    embed_query_ms = (time.perf_counter() - started) * 1000 / query_count
    for text, vector in zip(asked, query_vectors):  # warm the embedder's query cache: time the store's work
        embedder._cache[text] = vector  # noqa: SLF001 - the cache the turn pipeline hits on a repeated query
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "bench.db")
        ingest_rate = _ingest(db, embedder, texts, matrix, log)
        log("timing queries")
        exact_ms, exact_ids = _time(lambda v: _exact(matrix, v), query_vectors)
        knn_ms, knn_ids = _time(lambda v: [i - 1 for i, _ in vectors.knn(db, "memory", v, K)], query_vectors)
        recall_ms, _ = _time(lambda q: recall(db, embedder, q, k=K, kinds=("memory",)), asked)
        size_mb = Path(db.path).stat().st_size / 1e6
        db.close()
    return {
        **header, "n": n, "real_vectors": real, "queries": query_count, "k": K,
        "embedder": embedder.name, "embed_sentences_per_s": embed_rate, "embed_query_ms": round(embed_query_ms, 2),
        "ingest_rows_per_s": round(ingest_rate, 1), "store_mb": round(size_mb, 1),
        "recall_ms": _percentiles(recall_ms), "vector_knn_ms": _percentiles(knn_ms),
        "exact_numpy_ms": _percentiles(exact_ms),
        "knn_recall_at_10_vs_exact": round(_overlap(knn_ids, exact_ids), 4),
        "load_average_1m_at_end": load_average(),
    }


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


def _time(fn, items) -> tuple[list[float], list]:
    fn(items[0])  # warm-up: first-query page faults are not what a user waits for each turn
    times, outputs = [], []
    for item in items:
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
