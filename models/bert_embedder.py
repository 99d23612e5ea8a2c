"""Sentence embeddings without torch: a sentence-transformers BERT folder run over `tokenizers`.

The same weights and the same recipe as sentence-transformers — its tokenizer.json, truncation to the folder's
max_seq_length, the pooling its 1_Pooling/config.json names, L2 normalisation — without importing torch: a cold
start costs a fraction of a second instead of tens of seconds. The encoder is mlx.nn on a GPU (Metal on a Mac)
and its numpy twin on MLX's CPU backend (models/bert_numpy.py says why), or that twin's arrays run by onnxruntime
in a process that embeds for long (models/bert_onnx.py). tests/integration/test_mlx_embedder.py holds each to
cosine ≥ 0.999 against sentence-transformers.
"""
from __future__ import annotations

import importlib.util
import json
import threading
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from core.errors import ModelError
from models.query_cache import QueryCache

POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class FolderRecipe:
    """How sentence-transformers would run a folder: its pooling and its truncation length."""
    pooling: str
    max_seq_length: int


def read_recipe(folder: Path) -> FolderRecipe | None:
    """The recipe of a sentence-transformers folder this module runs exactly, else None (then ST runs it):
    modules Transformer → Pooling (mean or CLS) → optional Normalize, a plain BERT, a tokenizer.json."""
    from models.bert import is_supported_bert
    try:
        modules = json.loads((folder / "modules.json").read_text())
        config = json.loads((folder / "config.json").read_text())
        types = [module["type"] for module in modules]
        if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0]["path"]:
            return None
        if not (is_supported_bert(config) and (folder / "tokenizer.json").is_file()
                and (folder / "model.safetensors").is_file()):
            return None
        pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        chosen = [mode for key, mode in POOLING_MODES.items() if pooling.get(key)]
        others = [key for key, on in pooling.items() if key.startswith("pooling_mode") and on
                  and key not in POOLING_MODES]
        if len(chosen) != 1 or others:
            return None
        limit = int(config.get("max_position_embeddings", 512))
        bert_config = folder / "sentence_bert_config.json"
        if bert_config.is_file():
            options = json.loads(bert_config.read_text())
            if options.get("do_lower_case"):  # sentence-transformers lowercases the text first: not done here
                return None
            limit = min(limit, int(options.get("max_seq_length") or limit))
        return FolderRecipe(pooling=chosen[0], max_seq_length=limit)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


@dataclass
class BertEmbedder:
    """Batched, normalised embeddings with a small LRU cache for repeated queries (SentenceEmbedder's surface)."""

    encoder: Any  # models.bert.MLXBert or models.bert_numpy.NumpyBert: numpy ids and mask in, hidden states out
    tokenizer: Any  # tokenizers.Tokenizer, truncating to the recipe's max_seq_length
    name: str
    dimension: int
    pooling: str = "mean"
    backend: str = "mlx"
    batch_size: int = 32  # texts a batch holds at most
    batch_tokens: int | None = None  # and at most this many token rows, padding included (onnxruntime's: BATCH_TOKENS)
    cache_size: int = 512
    one_query: Callable[[], AbstractContextManager] = nullcontext  # how a single query runs (load_bert_embedder)
    vocab_size: int | None = None  # rows of the encoder's word table: ids past it are refused (_check_fits)
    _cache: QueryCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cache = QueryCache(self.cache_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) == 1:
            return self._cache.get(texts[0], self._embed_one)[None, :]
        return self._embed_many(texts)

    def _embed_one(self, text: str) -> np.ndarray:
        ids = np.array([self.tokenizer.encode(text).ids], dtype=np.int32)
        with self.one_query():
            return self._pool(ids, None)[0]  # one sentence: no padding, so no mask

    def _embed_many(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        # Similar lengths side by side: a batch is padded to its longest sentence, so sorting wastes least.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows in self._batches([len(encodings[i].ids) for i in order], order):
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int32)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for row, i in enumerate(rows):
                tokens = encodings[i].ids
                ids[row, :len(tokens)], mask[row, :len(tokens)] = tokens, 1.0
            out[rows] = self._pool(ids, mask)
        return out

    def _batches(self, widths: list[int], order: list[int]) -> Iterator[list[int]]:
        """`order`'s texts (ascending `widths`, their token counts) in batches of at most batch_size texts and
        batch_tokens padded token rows; a text alone always makes a batch."""
        rows: list[int] = []
        for width, i in zip(widths, order):
            full = len(rows) >= self.batch_size or (
                self.batch_tokens is not None and (len(rows) + 1) * width > self.batch_tokens)
            if rows and full:
                yield rows
                rows = []
            rows.append(i)
        if rows:
            yield rows

    def _pool(self, ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        _check_fits(ids, self.vocab_size)
        hidden = self.encoder(ids, mask)
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif mask is None:
            pooled = hidden.mean(axis=1)
        else:  # mean over real tokens only, as sentence-transformers' Pooling does
            weights = mask[..., None]
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return np.ascontiguousarray(pooled, dtype=np.float32)


def default_backend(lasting: bool = False) -> str:
    """mlx.nn where MLX has a GPU (Metal on a Mac). On its CPU backend, whose BLAS is the slow reference one:
    onnxruntime for a process that embeds for a long time, where it is installed (Linux); else numpy.

    Measured here (bench/cold.py): a query 2.7 ms through onnxruntime against 5.4 ms through numpy, but its session
    takes ~0.3 s to make against numpy's ~0.13 s load, more than a CLI verb's whole embedding."""
    import mlx.core as mx
    if mx.default_device().type == mx.gpu:
        return "mlx"
    if lasting and importlib.util.find_spec("onnxruntime") is not None:
        return "onnx"
    return "numpy"


class QueryThreads:
    """numpy's BLAS on at most `threads` threads for the length of a `with`, then as it was; one holder at a time.

    Why: a query is ~17 token rows, too few to share among many threads (OpenBLAS takes one per core), and each
    extra thread is one more that can be descheduled while the others wait for it. Two is the measured choice on
    this 2-core machine, in the turn at 100k (bench/turn.py's store, 150 turns a side, alternating): the query's
    embedding p50/p95 6.7/8.0 ms on two threads vs 10.3/12.3 on one, the turn p95 18.6 vs 22.8 ms. One thread
    bounds the tail when another process takes a core (p95 7.4 vs 61 ms standalone) but costs that much on every
    turn. The lock keeps two lanes from restoring each other's setting; batches keep every thread.
    """

    def __init__(self, threads: int = 2) -> None:
        from threadpoolctl import ThreadpoolController
        self._blas = ThreadpoolController().select(user_api="blas")
        self._threads = threads
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        # As a `with`: threadpoolctl lets one thread at a time change OpenBLAS's count and silently ignores the
        # others; leaving the block lets go of it, so the next lane's limit is not ignored.
        with self._lock, self._blas.limit(limits=self._threads):
            yield


def _check_fits(ids: np.ndarray, vocab_size: int | None) -> None:
    """Every id has a row in the word table (positions are bounded by read_recipe). MLX does not check a lookup:
    past the table it reads other memory, and crashes a long way past it; so a folder whose tokenizer does not
    match its weights is refused in words."""
    if vocab_size is not None and ids.size and int(ids.max()) >= vocab_size:
        raise ModelError(f"The embedding model's tokenizer gives token {int(ids.max())}, but its weights hold "
                         f"{vocab_size}: its files do not belong together. Choose another embedding model.")


def _onnx_or_numpy(encoder: Any) -> tuple[Any, str]:
    """The numpy encoder's arrays in an onnxruntime session; if onnxruntime cannot make one (a broken install), the
    numpy encoder itself: slower a query, the same vectors (tests hold the lasting encoder to "onnx")."""
    try:
        from models.bert_onnx import onnx_bert
        return onnx_bert(encoder), "onnx"
    except Exception:  # noqa: BLE001 - onnxruntime raises its own types; the embedder must still load
        return encoder, "numpy"


def load_bert_embedder(folder: Path, recipe: FolderRecipe, *, name: str, backend: str | None = None,
                       lasting: bool = False, mlx_worker: Any = None) -> BertEmbedder:
    """`mlx_worker`: the process's MLX owner (models/worker.py), which loads and runs the mlx.nn encoder; without
    one an mlx encoder gets a worker of its own (a process that runs no chat model beside it)."""
    from tokenizers import Tokenizer

    from models.bert import MLXBert, load_bert
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # The file's own settings (fixed padding to 128 here) are not what sentence-transformers applies: it truncates
    # to max_seq_length, special tokens included, and pads a batch to its longest sentence (done in _embed_many).
    tokenizer.enable_truncation(max_length=recipe.max_seq_length)
    tokenizer.no_padding()
    backend = backend or default_backend(lasting)
    one_query: Callable[[], AbstractContextManager] = nullcontext
    batch_tokens = None
    if backend in ("numpy", "onnx"):
        from models.bert_numpy import load_numpy_bert
        encoder: Any = load_numpy_bert(folder)
        if backend == "onnx":
            encoder, backend = _onnx_or_numpy(encoder)
        if backend == "numpy":
            one_query = QueryThreads()
        else:
            from models.bert_onnx import BATCH_TOKENS
            batch_tokens = BATCH_TOKENS
    else:
        from models.worker import MLXWorker
        owner = mlx_worker or MLXWorker("engram-mlx-embed")
        encoder = MLXBert(owner.call_between_steps(load_bert, folder), owner)  # a reply waits one token for it
    return BertEmbedder(encoder=encoder, tokenizer=tokenizer, name=name, dimension=encoder.config.hidden_size,
                        pooling=recipe.pooling, backend=backend, vocab_size=encoder.config.vocab_size,
                        one_query=one_query, batch_tokens=batch_tokens)
