"""MLX has one owner thread (issue 36.5): a Mac's mlx.nn embedder is called from the db, bulk and io lanes and the
jobs thread while a reply generates, and MLX does not support use from several threads. Here, on MLX's CPU back
end: three threads embed with the mlx.nn encoder for a bounded time while the tiny model streams replies, every
MLX call is checked to run on the worker (models/mlx_guard.py), and every vector equals a single-threaded run's."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from core.protocols import ChatMessage, SamplingParams
from models.bert_embedder import load_bert_embedder, read_recipe
from models.embeddings import resolve_model_path
from models.mlx_guard import MLXThreadError, MLXThreadGuard
from models.worker import MLXWorker

STRESS_SECONDS = 4.0  # each embedding thread keeps going this long, and at least one full round
TEXTS = [["I moved to Lisbon last spring.", "My sister is allergic to peanuts."],
         ["The dentist appointment is on Tuesday at 07:45.", "Zoë plays the cello.", "We booked a table."],
         ["naïve café résumé", "SELECT id FROM users;"]]
SINGLES = ["what did I say about Lisbon?", "who plays the cello"]


@pytest.fixture(scope="module")
def worker():
    owner = MLXWorker()
    yield owner
    owner.close()


@pytest.fixture(scope="module")
def mlx_embedder(worker):
    folder = Path(resolve_model_path("all-MiniLM-L6-v2"))
    embedder = load_bert_embedder(folder, read_recipe(folder), name="all-MiniLM-L6-v2", backend="mlx",
                                  mlx_worker=worker)
    embedder._cache.size = 0  # noqa: SLF001 - every single query computes afresh, none is served from the cache
    return embedder


def embed_all(embedder) -> list[np.ndarray]:
    return [embedder.embed(batch) for batch in TEXTS] + [embedder.embed([text]) for text in SINGLES]


def test_embedding_from_three_threads_beside_a_streaming_reply_stays_on_the_worker(worker, mlx_embedder,
                                                                                   tiny_model_dir):
    from models.chat import ChatEngine
    reference = embed_all(mlx_embedder)
    engine = ChatEngine.load(tiny_model_dir, worker=worker, context_tokens=2048)
    errors: list[BaseException] = []
    rounds = [0, 0, 0]
    mismatches: list[str] = []
    replies: list[int] = []
    deadline = time.monotonic() + STRESS_SECONDS

    def embed_until_deadline(slot: int) -> None:
        try:
            while True:
                for want, got in zip(reference, embed_all(mlx_embedder)):
                    if not np.array_equal(want, got):
                        mismatches.append(f"thread {slot}, round {rounds[slot]}")
                rounds[slot] += 1
                if time.monotonic() > deadline:
                    return
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    messages = [ChatMessage("user", "Tell me a long story about the sea.")]
    sampling = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=400, seed=7)
    try:
        with MLXThreadGuard((worker.thread,)) as guard:
            lanes = [threading.Thread(target=embed_until_deadline, args=(slot,), name=f"lane-{slot}")
                     for slot in range(3)]
            for lane in lanes:
                lane.start()
            while time.monotonic() < deadline or not replies:
                replies.append(sum(1 for _ in engine.stream(messages, sampling)))
            for lane in lanes:
                lane.join(timeout=120)
    finally:
        engine.unload()
    assert not any(lane.is_alive() for lane in lanes)
    assert errors == [] and guard.violations == []
    assert mismatches == []
    assert min(rounds) >= 1 and all(replies)


def test_the_guard_fails_an_mlx_call_from_a_thread_that_does_not_own_it(worker, mlx_embedder):
    import mlx.core as mx
    ids = np.array([[101, 2054, 102]], dtype=np.int32)
    before = mx.eval
    with MLXThreadGuard((worker.thread,)) as guard:
        through_the_owner = mlx_embedder.encoder(ids)  # the embedder's own path: runs on the worker
        with pytest.raises(MLXThreadError, match="not on the MLX owner"):
            mlx_embedder.encoder._forward(ids, None)  # noqa: SLF001 - what embedding on a lane did before
    assert through_the_owner.shape == (1, 3, 384)
    assert len(guard.violations) == 1 and "MainThread" in guard.violations[0]
    assert mx.eval is before  # left as it was


def test_a_short_job_runs_between_two_items_of_a_stream_and_others_wait_for_its_end(worker):
    order: list[str] = []
    got: list[int] = []
    started, release = threading.Event(), threading.Event()

    def items(stop):
        for n in range(3):
            order.append(f"item {n}")
            if n == 0:
                started.set()
                release.wait(10)
            yield n

    consumer = threading.Thread(target=lambda: got.extend(worker.stream(items)))
    consumer.start()
    assert started.wait(10)
    plain = worker.submit(order.append, "plain job")
    short = worker.submit_between_steps(order.append, "short job")
    release.set()
    short.result(10), plain.result(10)
    consumer.join(10)
    assert got == [0, 1, 2]
    assert order == ["item 0", "short job", "item 1", "item 2", "plain job"]


def test_an_embedding_runs_between_two_tokens_of_a_structured_generation(worker, mlx_embedder, tiny_model_dir):
    """Learning from a turn and reflection generate JSON in one long job on the worker: a lane's query embedding
    (recall, a memories search) runs at its next token instead of waiting for the whole object."""
    from models.chat import ChatEngine
    from models.structured import StructuredGenerator
    ids = np.array([[101, 2054, 102]], dtype=np.int32)
    expected = mlx_embedder.encoder(ids)
    engine = ChatEngine.load(tiny_model_dir, worker=worker, context_tokens=2048)
    queued, tokens_seen = threading.Event(), []
    done: dict[str, object] = {}

    def embed() -> tuple[np.ndarray, int]:  # runs on the worker: notes how many tokens were asked for by then
        return mlx_embedder.encoder._forward(ids, None), len(tokens_seen)  # noqa: SLF001

    def lane() -> None:
        future = worker.submit_between_steps(embed)
        queued.set()
        done["vector"], done["at"] = future.result()

    def stop() -> bool:  # asked on the worker before each token
        tokens_seen.append(1)
        if len(tokens_seen) == 1:
            threading.Thread(target=lane, name="lane").start()
            queued.wait(10)
        return False
    schema = {"type": "object", "properties": {"fact": {"type": "string", "maxLength": 200}}, "required": ["fact"]}
    try:
        with MLXThreadGuard((worker.thread,)) as guard:
            StructuredGenerator(engine, seed=1).generate_json([ChatMessage("user", "I live in Lisbon.")], schema,
                                                              max_tokens=120, stop=stop)
    finally:
        engine.unload()
    assert guard.violations == []
    assert done["at"] == 1 < len(tokens_seen)  # run right after the first token, not after the last
    assert np.array_equal(done["vector"], expected)
