"""The BERT encoder of models/bert_numpy.py run by onnxruntime on the CPU, where there is no Metal.

Why: a query is ~17 tokens, and numpy's OpenBLAS packs every weight matrix again for each product, so most of a
query's time went to copying weights (one 1536x384 Linear: 0.40 ms through numpy vs 0.14 ms through onnxruntime,
which packs its constant weights once, when the session is made). Measured here on one 17-token query, two
threads: 2.7 ms against numpy's 6.3 ms, the hidden states within 3e-6. The graph is the same arithmetic on the
same arrays (models/bert_numpy.NumpyBert holds and checks them); making the session costs 0.1–0.3 s, so a process
that embeds a few texts and exits keeps numpy (models/bert_embedder.default_backend).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.bert import BertConfig
from models.bert_numpy import NumpyBert, _Layer
from models.onnx_proto import Graph, value_info

# A query is ~17 token rows: split across many threads, each product waits on the slowest to wake. Two measured
# here (2.4 vs 3.3 ms on one); more cores were not, and four is a guess that keeps a batch's gain and a query's
# threads few.
MAX_THREADS = 4
# Token rows a batch holds at most, padding included: two ~115-token turns, a dozen short sentences. Measured here
# (256 ChatGPT-shaped turns, 113 tokens on average, sorted by length, 2 threads, CPU time at load 5-8): 14.3 turns per
# CPU-second in batches of 32, 17.9 of 8, 19.4 of 2 or 1; the vectors bit for bit the same. Smaller batches waste
# less on padding and keep a batch's activations in the cache (32 turns: 3,600 rows x 1,536 floats, 22 MB).
BATCH_TOKENS = 256


@dataclass
class OnnxBert:
    """input ids (batch, length) and an optional 0/1 mask → last hidden state, float32, like BertModel."""

    config: BertConfig
    session: Any  # onnxruntime.InferenceSession
    keep_alive: list[Any]  # the OrtValues the session reads its weights from: they must outlive it

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        ids = np.ascontiguousarray(input_ids, dtype=np.int64)
        batch, length = ids.shape
        if attention_mask is None:
            bias = np.zeros((batch, 1, 1, length), dtype=np.float32)
        else:  # as BertModel: padding keys get a large negative score
            bias = ((1.0 - attention_mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
        return self.session.run(None, {"ids": ids, "bias": np.ascontiguousarray(bias)})[0]


def onnx_bert(encoder: NumpyBert, threads: int | None = None) -> OnnxBert:
    """An onnxruntime session over the numpy encoder's arrays (already checked against its config).

    The large weights go to onnxruntime as arrays, not through the serialised graph: nothing is written to disk,
    and the word table stays the mapped file's pages. `threads`: by default the cores, at most MAX_THREADS."""
    import onnxruntime as ort

    graph, weights = _graph(encoder)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # its warnings go to stderr, which a CLI verb keeps for its own errors
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = threads or min(MAX_THREADS, os.cpu_count() or 1)
    # Its threads wait for work by spinning; between a user's turns that would be a core kept busy for nothing.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    values = [ort.OrtValue.ortvalue_from_numpy(array) for array in weights.values()]
    options.add_external_initializers(list(weights), values)
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    return OnnxBert(config=encoder.config, session=session, keep_alive=values)


def _graph(encoder: NumpyBert) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialised graph, and the arrays its weight names stand for (declared as external data, handed over
    when the session is made)."""
    config, e = encoder.config, encoder.embeddings
    g = Graph("bert")
    weights: dict[str, np.ndarray] = {}

    def weight(name: str, array: np.ndarray) -> str:
        weights[name] = np.ascontiguousarray(array, dtype=np.float32)
        return g.external(name, weights[name])

    g.inputs += [value_info("ids", np.int64, ["batch", "length"]),
                 value_info("bias", np.float32, ["batch", 1, 1, "length"])]
    g.outputs.append(value_info("hidden", np.float32, ["batch", "length", config.hidden_size]))
    length = g.node("Gather", [g.node("Shape", ["ids"]), g.constant("axis1", np.array([1], np.int64))], axis=0)
    zero = g.constant("zero", np.array([0], np.int64))
    positions = g.node("Slice", [weight("position", e["position_embeddings.weight"]), zero, length, zero])
    x = g.node("Add", [g.node("Gather", [weight("word", e["word_embeddings.weight"]), "ids"]), positions])
    x = g.node("Add", [x, weight("type0", e["token_type_embeddings.weight"][0])])
    x = g.node("LayerNormalization", [x, weight("norm.w", e["LayerNorm.weight"]),
                                      weight("norm.b", e["LayerNorm.bias"])], axis=-1, epsilon=config.layer_norm_eps)
    g.constant("one", np.array(1.0, np.float32))
    g.constant("half", np.array(0.5, np.float32))
    g.constant("root2", np.array(np.sqrt(2.0), np.float32))
    g.constant("heads", np.array([0, 0, config.num_attention_heads, -1], np.int64))
    g.constant("merged", np.array([0, 0, config.hidden_size], np.int64))
    g.constant("last", np.array([-1], np.int64))
    for i in range(4):  # where the query, key and value columns start and end in the stacked product
        g.constant(f"qkv{i}", np.array([i * config.hidden_size], np.int64))
    g.constant("scale", np.array((config.hidden_size // config.num_attention_heads) ** -0.5, np.float32))
    for index, layer in enumerate(encoder.layers):
        x = _layer(g, weight, f"l{index}.", layer, x, config)
    g.node("Identity", [x], output="hidden")
    return g.model(), weights


def _layer(g: Graph, weight: Any, prefix: str, layer: _Layer, x: str, config: BertConfig) -> str:
    """One encoder layer as bert_numpy's _layer computes it, on (batch, length, features)."""
    def linear(name: str, w: np.ndarray, b: np.ndarray, source: str) -> str:  # w is (out, in), b (out, 1)
        product = g.node("MatMul", [source, weight(f"{prefix}{name}.w", w.T)])
        return g.node("Add", [product, weight(f"{prefix}{name}.b", b[:, 0])])

    def norm(name: str, source: str, wb: tuple[np.ndarray, np.ndarray]) -> str:
        return g.node("LayerNormalization", [source, weight(f"{prefix}{name}.w", wb[0][:, 0]),
                                             weight(f"{prefix}{name}.b", wb[1][:, 0])],
                      axis=-1, epsilon=config.layer_norm_eps)

    qkv = linear("qkv", *layer.qkv, x)  # one product for the three: one packing of the input, one parallel section
    q, k, v = (g.node("Reshape", [g.node("Slice", [qkv, f"qkv{i}", f"qkv{i + 1}", "last"]), "heads"])
               for i in range(3))
    queries, keys = g.node("Transpose", [q], perm=[0, 2, 1, 3]), g.node("Transpose", [k], perm=[0, 2, 3, 1])
    scores = g.node("MatMul", [queries, keys])
    scores = g.node("Add", [g.node("Mul", [scores, "scale"]), "bias"])
    mixed = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), g.node("Transpose", [v], perm=[0, 2, 1, 3])])
    mixed = g.node("Reshape", [g.node("Transpose", [mixed], perm=[0, 2, 1, 3]), "merged"])
    attended = norm("attention_norm", g.node("Add", [linear("attention_out", *layer.attention_out, mixed), x]),
                    layer.attention_norm)
    inner = linear("intermediate", *layer.intermediate, attended)
    erf = g.node("Erf", [g.node("Div", [inner, "root2"])])  # exact GELU: x·½(1 + erf(x/√2))
    gelu = g.node("Mul", [g.node("Mul", [inner, "half"]), g.node("Add", [erf, "one"])])
    out = g.node("Add", [linear("output", *layer.output, gelu), attended])
    return norm("output_norm", out, layer.output_norm)
