"""How a lasting embedder batches many texts (models/bert_embedder.BertEmbedder._batches): sorted by length, at
most batch_size texts and, on onnxruntime, at most BATCH_TOKENS padded token rows a batch. The batching is the
import's and the chat's alike (both embed through load_embedder(lasting=True)); it changes the time, never a vector.
"""
from __future__ import annotations

import numpy as np
import pytest

from models.bert_embedder import BertEmbedder
from models.embeddings import load_embedder

FACTS = ["I moved to Porto last spring.", "ok", "My sister Zoë is allergic to peanuts and hates cilantro.",
         "Dr. Okafor said the knee needs six more weeks of physio before I can run again.", "東京に行きたい",
         "def add(a, b):\n    return a + b"]


def texts_under_the_cap() -> list[str]:
    """Lengths from 2 to ~150 tokens (under MiniLM's 256), in no order: batches of one text and of several."""
    return [" ".join(FACTS[(i + j) % len(FACTS)] for j in range(1 + (i * 5) % 9)) for i in range(12)]


@pytest.fixture(scope="module")
def lasting():
    return load_embedder("all-MiniLM-L6-v2", lasting=True)  # the window's, `engram chat`'s and the import's


def test_batches_hold_sorted_texts_within_both_limits():
    embedder = BertEmbedder(encoder=None, tokenizer=None, name="x", dimension=4, batch_size=4, batch_tokens=100)
    widths = [3, 5, 20, 25, 30, 30, 40, 60, 101, 120]
    batches = list(embedder._batches(widths, list(range(len(widths)))))
    assert [i for rows in batches for i in rows] == list(range(len(widths)))  # every text once, in order
    for rows in batches:
        assert len(rows) <= 4 and (len(rows) == 1 or len(rows) * max(widths[i] for i in rows) <= 100)
    assert batches == [[0, 1, 2, 3], [4, 5], [6], [7], [8], [9]]  # one past the budget alone: never dropped
    plain = BertEmbedder(encoder=None, tokenizer=None, name="x", dimension=4, batch_size=4)
    assert list(plain._batches(widths, list(range(10)))) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_token_budget_gives_the_vectors_the_old_batches_and_one_text_alone_give(lasting):
    texts = texts_under_the_cap()
    widths = [len(e.ids) for e in lasting.tokenizer.encode_batch(texts)]
    assert max(widths) < 256 and min(widths) < 10
    now = lasting.embed(texts)
    budget = lasting.batch_tokens
    try:
        lasting.batch_tokens = None  # as before: 32 texts a batch, padded to the longest
        before = lasting.embed(texts)
    finally:
        lasting.batch_tokens = budget
    alone = np.stack([lasting._embed_one(text) for text in texts])  # the query path: no padding at all
    assert np.abs(now - before).max() < 1e-5
    assert np.abs(now - alone).max() < 1e-5
    assert now.dtype == np.float32 and np.allclose(np.linalg.norm(now, axis=1), 1.0, atol=1e-5)


def test_the_lasting_onnxruntime_embedder_batches_by_tokens(lasting):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (a Mac embeds with mlx.nn on Metal)")
    from models.bert_onnx import BATCH_TOKENS
    embedder = lasting
    if embedder.backend == "mlx":
        pytest.skip("this machine embeds with mlx.nn on Metal: batches of 32, as before")
    assert embedder.backend == "onnx" and embedder.batch_tokens == BATCH_TOKENS
    assert load_embedder("all-MiniLM-L6-v2").batch_tokens is None  # a one-shot verb's numpy encoder: as before
