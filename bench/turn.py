"""Memory overhead of one chat turn, and one idle-time pass: `python -m bench.turn [--n 10000,100000] [--json]`.

For each N, a fresh store of N synthetic memories (real MiniLM vectors, cached like bench/recall.py), spread
over the past year, with critical facts, Hebbian edges and 2,000 earlier conversation turns (three sentences each,
every sentence with its vector). Then, per turn, through core.assistant.Assistant with a scripted chat model (the
model's own generation is not timed) that counts the prompt's tokens with a real chat tokenizer, as the product does
(`tokens_counted_with`):

  overhead = prepare (recall + critical facts + context assembly)
           + finish (episode row, reply attribution, access counts, co-activation)
           + graph update (Hebbian reinforcement of the reply's memories, as after a useful rating)

Reported next to it, measured in the same run: the query's embedding (a MiniLM inference, timed on its own just
before each turn, which then finds it in the embedder's cache, so the overhead measures the store's work as
bench/recall.py does) and the overhead with that embedding added, turn by turn; the episode's
embedding written after the reply (learn), recall alone on the same query (most of prepare), and a baseline:
a bare vector KNN of the same queries. The overhead is also given as this thread's CPU time (overhead_cpu_ms):
the turn's memory work is single-threaded, so on a machine shared with other work that figure shows what the
wall time would be with a core to itself (the target is judged on wall time).
The headline is the turn's p95 at the largest N with the query's embedding in it (target ≤ 20 ms at 100k):
what a user waits for before the reply starts. At the largest N it also times one consolidation pass and one
forgetting pass over the whole store (helper B2's core.memory.consolidate.consolidation_pass and
core.memory.forget.forgetting_pass), then recall of the same questions on the store those passes aged
(`after_idle_pass`: most memories archived).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import synthetic  # noqa: E402
from bench.meta import load_average, stamp  # noqa: E402
from bench.synthetic import queries, sentences  # noqa: E402
from core.assistant import Assistant  # noqa: E402
from core.config import Settings  # noqa: E402
from core.memory import hebbian  # noqa: E402
from core.memory.index import index_episodes  # noqa: E402
from core.memory.recall import recall  # noqa: E402
from core.memory.sentences import sentence_spans  # noqa: E402
from core.store import sentences as stored_sentences  # noqa: E402
from core.store import vectors  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from core.store.sessions import create_session  # noqa: E402
from tests.fakes import ScriptedChatModel  # noqa: E402

DAY = 86400.0
EPISODES = 2000
SENTENCES_A_TURN = 3
EDGES_PER_MEMORY = 0.5
CRITICAL = ("The user is allergic to penicillin.", "The user takes metformin every morning.",
            "The user has asthma.", "The user must never eat shellfish.")
REPLY = "Here is a short answer about that, with one or two details you told me before."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "engram-bench-cache")
    parser.add_argument("--no-passes", action="store_true", help="skip the consolidation and forgetting passes")
    parser.add_argument("--embed-limit", type=int, default=20_000,
                        help="above this N, without cached sentence embeddings, compose vectors from embedded parts")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    log = (lambda *_: None) if args.json else _log
    sizes = [int(s) for s in args.n.split(",") if s.strip()]
    result = run(sizes, args.turns, args.cache, passes=not args.no_passes, embed_limit=args.embed_limit, log=log)
    print(json.dumps(result, indent=1))
    return 0


def run(sizes: list[int], turns: int, cache: Path, *, passes: bool = True, embed_limit: int = 20_000,
        log=print) -> dict:
    from models.embeddings import load_embedder
    embedder = load_embedder(lasting=True)  # the window's embedder: the turn happens in a process that lasts
    count_tokens, counted_with = token_counter()
    result = {**stamp("turn"), "turns": turns, "tokens_counted_with": counted_with, "sizes": {}}
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            db = open_db(Path(folder) / "bench.db")
            vectors_from = _build(db, embedder, n, cache, embed_limit, log)
            result["sizes"][str(n)] = {"vectors": vectors_from,
                                       **_time_turns(db, embedder, count_tokens, turns, log)}
            if passes and n == max(sizes):
                result["idle_pass_at_n"] = n
                result["idle_pass"] = _time_passes(db, embedder, log)
                result["after_idle_pass"] = _time_aged_recall(db, embedder, turns)
            db.close()
    largest = result["sizes"].get(str(max(sizes))) if sizes else None
    if largest:  # what a user waits for: the new message's embedding is part of the turn
        runtime = getattr(embedder, "backend", "sentence-transformers")
        result["headline"] = {"n": max(sizes), "target_ms": 20.0, "embedder": f"{embedder.name} on {runtime}",
                              "turn_p95_ms_with_query_embedding": largest["overhead_with_query_embedding_ms"]["p95"]}
    result["load_average_1m_at_end"] = load_average()
    return result


def _build(db, embedder, n: int, cache: Path, embed_limit: int, log) -> str:
    """n memories spread over a year, critical facts, Hebbian edges and earlier turns with vectors."""
    texts = sentences(n)
    if n <= embed_limit or (cache / f"synthetic-{embedder.name}-{n}.npy").exists():
        matrix, _ = _embeddings(embedder, texts, cache, log)
        vectors_from = "MiniLM sentence embeddings"
    else:
        matrix = composed_embeddings(embedder, n)
        vectors_from = "MiniLM embeddings of each sentence's parts, summed and normalised"
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    now = db.now()
    rng = random.Random(5)
    started = time.perf_counter()
    for start in range(0, n, 2000):
        with db.transaction():
            ids = [add_memory(db, text, created_at=now - rng.uniform(0, 365) * DAY)
                   for text in texts[start:start + 2000]]
            vectors.upsert_vectors(db, "memory", ids, matrix[start:start + 2000])
    critical = [add_memory(db, text, subject="user", relation=rel, critical=True)
                for text, rel in zip(CRITICAL, ("allergy", "medication", "condition", "hard_constraint"))]
    vectors.upsert_vectors(db, "memory", critical, embedder.embed(list(CRITICAL)))
    _edges(db, n, rng)
    _episodes(db, texts, matrix, now, rng)
    vectors.upkeep(db)  # what the nightly upkeep leaves (clusters and packs); the bulk load left no packs
    log(f"built {n} memories in {time.perf_counter() - started:.1f} s")
    return vectors_from


def composed_embeddings(embedder, n: int, seed: int = 7) -> np.ndarray:
    """Vectors for sentences(n) from real MiniLM vectors of their parts (person, action, thing, place, time).

    Embedding 100,000 sentences costs about 30 CPU-minutes on this machine; the parts are 134 phrases. The
    rows keep the store's realistic structure (sentences sharing parts are close), which is what recall's
    prefilter and rescoring see; bench/recall.py measures quality on real sentence embeddings.
    """
    lists = (synthetic.PEOPLE, synthetic.ACTIONS, synthetic.THINGS, synthetic.PLACES, synthetic.TIMES)
    part_vectors = [embedder.embed(list(words)) for words in lists]
    rng = random.Random(seed)  # the same draws, in the same order, as bench.synthetic.sentences
    matrix = np.zeros((n, embedder.dimension), dtype=np.float32)
    for row in range(n):
        for words, vectors_of in zip(lists, part_vectors):
            matrix[row] += vectors_of[rng.choice(range(len(words)))]
        rng.choice(synthetic.CODAS)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

def _edges(db, n: int, rng: random.Random) -> None:
    pairs = {tuple(sorted(rng.sample(range(1, n + 1), 2))) for _ in range(int(n * EDGES_PER_MEMORY))}
    with db.transaction():
        db.conn.executemany("INSERT OR IGNORE INTO edges(a_id, b_id, kind, weight, last_coactivated, created_at) "
                            "VALUES (?, ?, 'hebbian', ?, NULL, ?)",
                            [(a, b, rng.uniform(0.1, 0.9), db.now()) for a, b in pairs])


def _episodes(db, texts: list[str], matrix: np.ndarray, now: float, rng: random.Random) -> None:
    """EPISODES earlier turns of three sentences each, with the reply "Noted.": each sentence has its own vector
    (the matrix's, as the product gives a turn's sentences theirs: core.memory.sentences) and the turn the
    normalised mean of the three (its own MiniLM vector would cost 2,000 more embeddings a run)."""
    session = create_session(db, "earlier")
    count = min(EPISODES, len(texts) // SENTENCES_A_TURN)
    with db.transaction():
        ids, spans = [], {}
        for i in range(count):
            said = texts[SENTENCES_A_TURN * i:SENTENCES_A_TURN * (i + 1)]
            db.execute("INSERT INTO episodes(session_id, user_text, assistant_text, created_at) VALUES (?,?,?,?)",
                       (session, " ".join(said), "Noted.", now - rng.uniform(0, 60) * DAY))
            ids.append(db.conn.last_insert_rowid())
            spans[ids[-1]] = sentence_spans(" ".join(said))
        parts = matrix[:count * SENTENCES_A_TURN]
        turns = parts.reshape(count, SENTENCES_A_TURN, -1).mean(axis=1)
        vectors.upsert_vectors(db, "episode", ids, turns / np.linalg.norm(turns, axis=1, keepdims=True))
        assert all(len(s) == SENTENCES_A_TURN for s in spans.values())  # one vector a sentence, in order
        stored_sentences.write(db, spans, parts)


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
    asked = queries(turns + 1, seed=23)
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
    e0 = time.perf_counter()  # then the turn's recall finds it in the embedder's cache
    embedder.embed([text])
    c0, t0 = time.thread_time(), time.perf_counter()
    prepared = assistant.prepare(session, text)
    c1, t1 = time.thread_time(), time.perf_counter()
    reply = "".join(chunk.text for chunk in assistant.stream(prepared))
    c2, t2 = time.thread_time(), time.perf_counter()
    record = assistant.finish(prepared, reply, "stop")
    t3 = time.perf_counter()
    hebbian.reinforce(db, record.used, assistant.settings.hebbian)
    c4, t4 = time.thread_time(), time.perf_counter()
    index_episodes(db, embedder, [record.episode_id])
    t5 = time.perf_counter()
    vectors.knn(db, "memory", vector, assistant.settings.recall.k)
    t6 = time.perf_counter()
    recall(db, embedder, text, k=assistant.settings.recall.k, settings=assistant.settings, session_id=session)
    t7 = time.perf_counter()
    ms = 1000.0
    overhead = ((t1 - t0) + (t4 - t2)) * ms
    embed = (t0 - e0) * ms
    return {"overhead": overhead, "overhead_cpu": ((c1 - c0) + (c4 - c2)) * ms, "embed_query": embed,
            "with_embedding": overhead + embed, "prepare": (t1 - t0) * ms, "finish": (t3 - t2) * ms,
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
    asked = queries(turns + 1, seed=23)
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


def _embeddings(embedder, texts: list[str], cache: Path, log) -> tuple[np.ndarray, float | None]:
    """Sentence vectors, cached per N in the same files as bench/recall.py (same sentences, same model)."""
    path = cache / f"synthetic-{embedder.name}-{len(texts)}.npy"
    if path.exists():
        return np.load(path), None
    log(f"embedding {len(texts)} sentences (cached afterwards in {path})")
    started = time.perf_counter()
    matrix = embedder.embed(texts)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix, len(texts) / (time.perf_counter() - started)


def _percentiles(times: list[float]) -> dict[str, float]:
    p50, p95, p99 = np.percentile(times, [50, 95, 99])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "p99": round(float(p99), 2)}


def _log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
