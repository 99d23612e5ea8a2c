"""A store like a user's, from real conversational text (bench/realtext.py), built once and cached outside the repo.

`python -m bench.realstore --n 100000` builds (or finds) ~/.cache/engram-bench/realtext-<n>-<key>/, a data folder
the CLI and the window open as is (`--data-dir`): engram.db with n memories and n/10 earlier turns (episodes, in
sessions of 20, each with its sentences' vectors), 4 critical facts and n/2 Hebbian edges, written through the
store's own API (core.store.memories.add_memory, core.store.episodes.add_episode, core.store.vectors, then
vectors.upkeep as an import ends); beside it memory_vectors.npy (row i = memory id i + 1, every memory) for
exact search.
The key hashes everything the store is made from, so a rerun with the same inputs reuses it.

Vectors: every pool sentence (~19,000) is embedded for real by the product's window embedder (models.embeddings,
lasting: onnxruntime here). A turn's vector is the normalised mean of its sentences' vectors: embedding 1.1M
whole turns costs hours on this shared 2-core CPU (14–60 texts/s measured), the sentences minutes. `--check K`
embeds K whole turns for real and reports how close the composed vectors are (cosine, and recall@10 of the
composed store against the real one for the data's own questions): the JSON says so beside every figure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import realtext  # noqa: E402

CACHE = Path.home() / ".cache" / "engram-bench"
DAY = 86400.0
SESSION_TURNS = 20
CRITICAL = ("The user is allergic to penicillin.", "The user takes metformin every morning.",
            "The user has asthma.", "The user must never eat shellfish.")
VERSION = "store-v1"


@dataclass(frozen=True)
class RealStore:
    folder: Path  # a data folder: engram.db inside
    memories: int
    episodes: int

    @property
    def db_path(self) -> Path:
        return self.folder / "engram.db"

    def memory_vectors(self) -> np.ndarray:
        return np.load(self.folder / "memory_vectors.npy", mmap_mode="r")

    def info(self) -> dict:
        return json.loads((self.folder / "store.json").read_text(encoding="utf-8"))

    def copy_to(self, target: Path) -> Path:
        """A throw-away copy of the data folder (benches that write: turns, `memory add`)."""
        target.mkdir(parents=True, exist_ok=True)
        for name in ("engram.db", "settings.json"):
            if (self.folder / name).exists():
                shutil.copy2(self.folder / name, target / name)
        return target


def key(n: int, embedder_name: str) -> str:
    data = realtext.data_folder()
    sizes = sorted((str(p.relative_to(data)), p.stat().st_size) for p in data.rglob("*.json"))
    text = json.dumps([VERSION, realtext.RULES, n, embedder_name, sizes])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def pool_vectors(embedder, log, cache: Path = CACHE, needed: set[int] | None = None) -> np.ndarray:
    """Every pool sentence's vector, embedded once by the product's embedder (cached by the pool's contents). A
    small store (`needed`: the sentences its turns use, under half the pool) without that cache embeds only those:
    the other rows stay zero and nothing is cached."""
    pool, _names = realtext.sentence_pool()
    texts = [sentence for _source, sentence in pool]
    digest = hashlib.sha1(json.dumps([embedder.name, texts]).encode("utf-8")).hexdigest()[:12]
    path = cache / f"pool-{digest}.npy"
    if path.exists():
        return np.load(path)
    if needed is not None and len(needed) < len(texts) // 2:
        order = sorted(needed)
        matrix = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
        matrix[order] = embedder.embed([texts[i] for i in order])
        return matrix
    log(f"embedding {len(texts)} pool sentences with {embedder.name} on {embedder.backend}")
    started = time.perf_counter()
    matrix = np.concatenate([embedder.embed(texts[i:i + 2048]) for i in range(0, len(texts), 2048)])
    log(f"  {len(texts) / (time.perf_counter() - started):.1f} sentences/s")
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def composed(parts: list[tuple[int, ...]], pool: np.ndarray) -> np.ndarray:
    out = np.zeros((len(parts), pool.shape[1]), dtype=np.float32)
    for row, places in enumerate(parts):
        out[row] = pool[list(places)].sum(axis=0)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def cached(n: int, embedder_name: str, cache: Path = CACHE) -> RealStore | None:
    """The store for n memories if it was built already (building 1M takes about half an hour here)."""
    folder = cache / f"realtext-{n}-{key(n, embedder_name)}"
    if not (folder / "store.json").exists():
        return None
    info = json.loads((folder / "store.json").read_text(encoding="utf-8"))
    return RealStore(folder, info["memories"], info["episodes"])


class NotBuilt(RuntimeError):
    pass


def build(n: int, *, embedder=None, log=print, cached_only: bool = False, cache: Path = CACHE) -> RealStore:
    """The cached store for n memories, built first if it is not there (`cached_only`: NotBuilt instead)."""
    if embedder is None:
        from models.embeddings import load_embedder
        embedder = load_embedder(lasting=True)
    found = cached(n, embedder.name, cache)
    if found is not None:
        return found
    if cached_only:
        raise NotBuilt(f"the real-text store of {n:,} memories is not built yet: python -m bench.realstore --n {n}")
    folder = cache / f"realtext-{n}-{key(n, embedder.name)}"
    episodes = n // 10
    parts = realtext.turns(n + episodes)
    pool = pool_vectors(embedder, log, cache, {i for places in parts for i in places})
    building = folder.with_name(folder.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    started = time.perf_counter()
    matrix = _write(building, embedder, parts, pool, n, log)
    np.save(building / "memory_vectors.npy", matrix)
    info = {"memories": n, "episodes": episodes, "rules": realtext.RULES, "embedder": embedder.name,
            "embedder_backend": getattr(embedder, "backend", "?"), "pool_sentences": len(pool),
            "build_s": round(time.perf_counter() - started, 1),
            "vectors": "each pool sentence embedded for real; a turn's vector the normalised mean of its sentences'"}
    (building / "store.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    building.rename(folder)
    log(f"built {folder} in {info['build_s']} s")
    return RealStore(folder, n, episodes)


def _write(folder: Path, embedder, parts: list[tuple[int, ...]], pool: np.ndarray, n: int, log) -> np.ndarray:
    from core.store import vectors
    from core.store.db import open_db
    from core.store.memories import add_memory
    db = open_db(folder / "engram.db")
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    now, rng = db.now(), random.Random(5)
    matrix = np.empty((n, pool.shape[1]), dtype=np.float32)
    for start in range(0, n, 5000):
        chunk = parts[start:min(start + 5000, n)]
        matrix[start:start + len(chunk)] = composed(chunk, pool)
        with db.transaction():
            ids = [add_memory(db, realtext.text(p), created_at=now - rng.uniform(0, 365) * DAY) for p in chunk]
            vectors.upsert_vectors(db, "memory", ids, matrix[start:start + len(chunk)])
        if start % 100_000 == 0:
            log(f"  memories {start + len(chunk)}")
    critical = [add_memory(db, text, subject="user", relation=rel, critical=True)
                for text, rel in zip(CRITICAL, ("allergy", "medication", "condition", "hard_constraint"))]
    critical_vectors = embedder.embed(list(CRITICAL))
    vectors.upsert_vectors(db, "memory", critical, critical_vectors)
    matrix = np.concatenate([matrix, critical_vectors])  # row i is memory id i + 1, the critical facts last
    _edges(db, n, rng)
    _episodes(db, parts[n:], pool, now, rng, log)
    log("  upkeep")
    vectors.upkeep(db)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return matrix


def _edges(db, n: int, rng: random.Random) -> None:
    pairs = {tuple(sorted(rng.sample(range(1, n + 1), 2))) for _ in range(n // 2)}
    with db.transaction():
        db.conn.executemany("INSERT OR IGNORE INTO edges(a_id, b_id, kind, weight, last_coactivated, created_at) "
                            "VALUES (?, ?, 'hebbian', ?, NULL, ?)",
                            [(a, b, rng.uniform(0.1, 0.9), db.now()) for a, b in pairs])


def _episodes(db, parts: list[tuple[int, ...]], pool: np.ndarray, now: float, rng: random.Random, log) -> None:
    """Earlier turns with the reply "Noted.", in sessions of SESSION_TURNS; each sentence gets its pool vector and
    the turn its composed vector (core.memory.index would embed both; the same sentences)."""
    from core.memory.sentences import turn_sentences
    from core.store import sentences as stored_sentences
    from core.store import vectors
    from core.store.episodes import add_episode
    from core.store.sessions import create_session
    for start in range(0, len(parts), 5000):
        chunk = parts[start:start + 5000]
        with db.transaction():
            ids, spans, rows = [], {}, []
            for offset, places in enumerate(chunk):
                if (start + offset) % SESSION_TURNS == 0:
                    session = create_session(db, f"earlier {(start + offset) // SESSION_TURNS}")
                said = realtext.text(places)
                ids.append(add_episode(db, said, "Noted.", session_id=session,
                                       created_at=now - rng.uniform(0, 365) * DAY))
                found = turn_sentences(said, "Noted.")
                if len(found) == len(places):  # the product's splitter agrees with the pool's sentences
                    spans[ids[-1]] = found
                    rows += list(places)
            vectors.upsert_vectors(db, "episode", ids, composed(chunk, pool))
        stored_sentences.write(db, spans, pool[rows])
    log(f"  episodes {len(parts)}")


def check(store: RealStore, embedder, count: int, queries: int = 100) -> dict:
    """How close composed vectors are to the real ones: `count` stored turns embedded whole, for real."""
    from core.store.db import open_db
    db = open_db(store.db_path)
    texts = [db.scalar("SELECT statement FROM memories WHERE id = ?", (i,)) for i in range(1, count + 1)]
    db.close()
    started = time.perf_counter()
    real = np.concatenate([embedder.embed(texts[i:i + 256]) for i in range(0, count, 256)])
    rate = count / (time.perf_counter() - started)
    mine = np.asarray(store.memory_vectors()[:count])
    asked = embedder.embed(realtext.questions(queries))
    top = lambda m: np.argsort(-(asked @ m.T), axis=1)[:, :10]  # noqa: E731
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top(mine), top(real))])
    return {"turns_embedded_whole": count, "whole_turns_per_s": round(rate, 1),
            "cosine_composed_vs_real": {"mean": round(float(np.mean(np.sum(mine * real, axis=1))), 4),
                                        "p5": round(float(np.percentile(np.sum(mine * real, axis=1), 5)), 4)},
            "top10_overlap_composed_vs_real": round(float(overlap), 4), "questions": queries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--check", type=int, default=0, help="embed this many stored turns whole, for real")
    args = parser.parse_args(argv)
    from models.embeddings import load_embedder
    embedder = load_embedder(lasting=True)
    log = lambda *parts: print(*parts, file=sys.stderr, flush=True)  # noqa: E731
    store = build(args.n, embedder=embedder, log=log)
    out = {"folder": str(store.folder), **store.info()}
    if args.check:
        out["check"] = check(store, embedder, args.check)
        (store.folder / "check.json").write_text(json.dumps(out["check"], indent=1), encoding="utf-8")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
