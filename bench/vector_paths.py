"""The vector search of a large table both ways, in one run: `python -m bench.vector_paths --n 100000 [--json]`.

On bench/realstore.py's real-text store (cached; `--cached-only` is implied: it is never built here), the same
questions (the data's own, embedded once by the window's embedder) are searched by core.store.vectors.knn
  - as the product searches a large table now: every row's sign bits (core.store.vector_scan), and
  - through the clusters' probes as before (the store is clustered by its upkeep; the bench makes knn take that
    path by answering `_scans_every_row` with False: the comparison is the whole point of this bench),
each against exact search (numpy over every stored vector): recall@10 and the time of each query, p50/p95. The first
query of a fresh connection (the bits read from sqlite-vec's chunks) is timed apart. On a throw-away copy of the store.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import realstore, realtext  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402

K = 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    try:
        result = run(args.n, args.queries)
    except realstore.NotBuilt as exc:
        print(f"vector_paths: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    return 0


def run(n: int, query_count: int) -> dict:
    from core.store import vectors
    from core.store.db import open_db
    from models.embeddings import load_embedder
    header = stamp("vector_paths")
    embedder = load_embedder(lasting=True)
    store = realstore.build(n, embedder=embedder, cached_only=True)
    asked = realtext.questions(query_count + 3)[3:]  # bench/recall.py's questions (its first 3 go to cold runs)
    queries = np.asarray(embedder.embed(asked), dtype=np.float32)
    matrix = np.asarray(store.memory_vectors())
    exact = [[int(i) + 1 for i in np.argsort(-(matrix @ q))[:K]] for q in queries]
    with tempfile.TemporaryDirectory(prefix="engram-vector-paths-") as folder:
        db = open_db(store.copy_to(Path(folder) / "data") / "engram.db")
        try:
            started = time.perf_counter()
            vectors.knn(db, "memory", queries[0], K)
            first_ms = (time.perf_counter() - started) * 1000
            scan = _timed(db, queries, exact)
            with mock.patch.object(vectors, "_scans_every_row", lambda _db, _name: False):
                probes = _timed(db, queries, exact)
        finally:
            db.close()
    return {**header, "n": n, "queries": len(queries), "k": K, "store": str(store.folder),
            "full_bit_scan": scan, "cluster_probes": probes,
            "first_query_of_a_connection_ms": round(first_ms, 1), "load_average_1m_at_end": load_average()}


def _timed(db, queries: np.ndarray, exact: list[list[int]]) -> dict:
    from core.store import vectors
    times, overlap = [], []
    for query, truth in zip(queries, exact):
        started = time.perf_counter()
        found = vectors.knn(db, "memory", query, K)
        times.append((time.perf_counter() - started) * 1000)
        overlap.append(len({i for i, _ in found} & set(truth)) / K)
    p50, p95 = np.percentile(times, [50, 95])
    return {"recall_at_10_vs_exact": round(float(np.mean(overlap)), 4),
            "ms": {"p50": round(float(p50), 2), "p95": round(float(p95), 2)}}


if __name__ == "__main__":
    raise SystemExit(main())
