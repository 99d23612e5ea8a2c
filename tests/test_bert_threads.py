"""One query's embedding runs numpy's BLAS on at most two threads (models/bert_embedder.QueryThreads), batches on
all of them, and the setting is always put back, also when two lanes embed at once and when the encoder fails."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import OpenBLASController, ThreadpoolController

from models.bert_embedder import BertEmbedder, QueryThreads, load_bert_embedder, read_recipe
from models.embeddings import resolve_model_path


# numpy's Accelerate build on a Mac is no BLAS threadpoolctl controls: QueryThreads' limit does nothing there
NO_BLAS = "threadpoolctl finds no BLAS it controls in this process (numpy's Accelerate build on a Mac)"


def blas_threads() -> int:
    return ThreadpoolController().select(user_api="blas").info()[0]["num_threads"]


@dataclass
class Recording:
    """The real encoder, noting numpy's BLAS thread count each time it runs."""
    encoder: object
    seen: list[tuple[int, int]] = field(default_factory=list)  # (batch rows, BLAS threads)
    fail: bool = False

    def __call__(self, ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        self.seen.append((ids.shape[0], blas_threads()))
        if self.fail:
            raise RuntimeError("encoder failed")
        return self.encoder(ids, mask)


@pytest.fixture(scope="module")
def numpy_embedder() -> BertEmbedder:
    folder = Path(resolve_model_path("all-MiniLM-L6-v2"))
    return load_bert_embedder(folder, read_recipe(folder), name="all-MiniLM-L6-v2", backend="numpy")


@pytest.fixture
def four_threads():
    """numpy's BLAS on four threads for the test (as on a 4-core machine, whatever this one has), as it was
    afterwards. The setting is made and then let go: threadpoolctl lets one thread at a time change OpenBLAS's
    count, and silently ignores the others, so a fixture holding it would hide a lane whose limit did nothing."""
    if not ThreadpoolController().select(user_api="blas").info():
        pytest.skip(NO_BLAS)
    limiter = ThreadpoolController().limit(limits=4, user_api="blas")
    OpenBLASController.clear_controlling_thread(force=True)
    assert blas_threads() == 4
    yield
    limiter.restore_original_limits()
    OpenBLASController.clear_controlling_thread(force=True)


def test_one_query_runs_on_two_blas_threads_and_a_batch_on_all(numpy_embedder, four_threads):
    recording = Recording(numpy_embedder.encoder)
    embedder = BertEmbedder(encoder=recording, tokenizer=numpy_embedder.tokenizer, name="m", dimension=384,
                            backend="numpy", one_query=numpy_embedder.one_query)
    assert isinstance(numpy_embedder.one_query, QueryThreads)
    embedder.embed(["Where does my sister live now?"])
    embedder.embed(["Ana lives in Lisbon.", "Ana's dog is called Biscuit.", "Tea every morning."])
    assert recording.seen == [(1, 2), (3, 4)]
    assert blas_threads() == 4


def test_the_thread_count_is_put_back_when_the_encoder_fails(numpy_embedder, four_threads):
    recording = Recording(numpy_embedder.encoder, fail=True)
    embedder = BertEmbedder(encoder=recording, tokenizer=numpy_embedder.tokenizer, name="m", dimension=384,
                            backend="numpy", one_query=numpy_embedder.one_query)
    with pytest.raises(RuntimeError, match="encoder failed"):
        embedder.embed(["a query that fails"])
    assert recording.seen == [(1, 2)] and blas_threads() == 4


def test_two_lanes_embedding_at_once_each_run_on_two_threads_and_leave_the_count_as_it_was(numpy_embedder,
                                                                                          four_threads):
    recording = Recording(numpy_embedder.encoder)
    embedder = BertEmbedder(encoder=recording, tokenizer=numpy_embedder.tokenizer, name="m", dimension=384,
                            backend="numpy", one_query=numpy_embedder.one_query)
    errors: list[BaseException] = []
    # Both lanes stay alive to the end and take turns at every query, as the window's do: a lock that favours the
    # thread that just let go would otherwise run one lane to its end before the other starts.
    turns = threading.Barrier(2, timeout=60)

    def lane(name: str) -> None:
        try:
            for index in range(10):
                vector = embedder.embed([f"{name} asks question number {index}"])
                assert vector.shape == (1, 384)
                turns.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    lanes = [threading.Thread(target=lane, args=(name,)) for name in ("db", "model")]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join(timeout=120)
    assert not errors and blas_threads() == 4
    assert recording.seen == [(1, 2)] * 20  # every lane's query on two threads, not only the first lane's


def test_one_query_gives_the_same_vector_as_in_a_batch(numpy_embedder):
    text = "What did my sister say about the trip to Lisbon?"
    alone = numpy_embedder._embed_one(text)  # noqa: SLF001 - the batch-of-one path, without the cache
    in_batch = numpy_embedder.embed([text, "another sentence"])[0]
    assert float(alone @ in_batch) >= 0.99999
