"""A small BERT encoder in mlx.nn: enough of Hugging Face's BertModel to run sentence-transformers' MiniLM.

Only what a sentence embedder needs: word + position + token-type embeddings, post-norm encoder layers with exact
(erf) GELU, and the last hidden state. The parameter names follow the safetensors file, so `load_weights` maps one
to one; the pooler head is unused by mean pooling and is not built.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from models.checks import check_safetensors

# Keys a BERT checkpoint carries that this encoder does not use: a constant buffer and the unused CLS pooler.
_UNUSED_KEYS = ("embeddings.position_ids", "pooler.")


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_file(cls, path: Path) -> "BertConfig":
        raw = json.loads(Path(path).read_text())
        return cls(**{name: raw[name] for name in cls.__dataclass_fields__ if name in raw})


def is_supported_bert(raw: dict) -> bool:
    """True for a config.json this encoder runs exactly: an absolute-position BERT with exact GELU."""
    return (raw.get("model_type") == "bert" and raw.get("hidden_act", "gelu") == "gelu"
            and raw.get("position_embedding_type", "absolute") == "absolute")


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def __call__(self, input_ids: mx.array) -> mx.array:
        positions = mx.arange(input_ids.shape[1])
        # A single sentence has token type 0 throughout; row 0 of the table is added to every position.
        summed = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
                  + self.token_type_embeddings.weight[0])
        return self.LayerNorm(summed)


class BertSelfAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def __call__(self, x: mx.array, mask: mx.array | None) -> mx.array:
        batch, length, width = x.shape
        split = lambda t: t.reshape(batch, length, self.heads, -1).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scale = (width // self.heads) ** -0.5
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        return out.transpose(0, 2, 1, 3).reshape(batch, length, width)


class BertDenseNorm(nn.Module):
    """Hugging Face's BertSelfOutput / BertOutput: project, add the residual, normalise."""

    def __init__(self, width_in: int, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(width_in, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def __call__(self, x: mx.array, residual: mx.array) -> mx.array:
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)  # the checkpoint's name: attention.self.query...
        self.output = BertDenseNorm(config.hidden_size, config)

    def __call__(self, x: mx.array, mask: mx.array | None) -> mx.array:
        return self.output(self.self(x, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def __call__(self, x: mx.array) -> mx.array:
        return nn.gelu(self.dense(x))  # exact erf GELU, as BERT's "gelu"


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertDenseNorm(config.intermediate_size, config)

    def __call__(self, x: mx.array, mask: mx.array | None) -> mx.array:
        attended = self.attention(x, mask)
        return self.output(self.intermediate(attended), attended)


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = [BertLayer(config) for _ in range(config.num_hidden_layers)]


class BertModel(nn.Module):
    """input ids (batch, length) and an optional 0/1 attention mask → last hidden state (batch, length, hidden)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)

    def __call__(self, input_ids: mx.array, attention_mask: mx.array | None = None) -> mx.array:
        x = self.embeddings(input_ids)
        bias = None
        if attention_mask is not None:  # padding keys get a large negative score: softmax gives them ~0 weight
            bias = ((1.0 - attention_mask.astype(x.dtype)) * -1e9)[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, bias)
        return x


@dataclass
class MLXBert:
    """BertModel behind numpy in and out, as models/bert_numpy.NumpyBert: the embedder pools in numpy.

    Every forward pass runs on `owner`, the process's MLX worker (models/worker.py): the db, bulk and io lanes and
    the jobs thread all embed, while a reply generates on that worker, and MLX must not be used from two threads."""
    model: BertModel
    owner: Any = None  # models.worker.MLXWorker; None: a worker of its own

    def __post_init__(self) -> None:
        if self.owner is None:
            from models.worker import MLXWorker
            self.owner = MLXWorker("engram-mlx-embed")

    @property
    def config(self) -> BertConfig:
        return self.model.config

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        return self.owner.call_between_steps(self._forward, input_ids, attention_mask)

    def _forward(self, input_ids: np.ndarray, attention_mask: np.ndarray | None) -> np.ndarray:
        mask = None if attention_mask is None else mx.array(attention_mask)
        return np.array(self.model(mx.array(input_ids), mask).astype(mx.float32), copy=True)


def encoder_weights(weights: dict) -> dict:
    """A checkpoint's tensors under this encoder's names: some files nest them under bert.; the rest is unused."""
    weights = {key.removeprefix("bert."): value for key, value in weights.items()}
    return {key: value for key, value in weights.items() if not key.startswith(_UNUSED_KEYS)}


def load_bert(folder: Path) -> BertModel:
    """The encoder with the folder's config.json and model.safetensors, in eval mode."""
    config = BertConfig.from_file(folder / "config.json")
    model = BertModel(config)
    check_safetensors(folder / "model.safetensors")  # a folder the user named: MLX's reader trusts its shapes
    weights = encoder_weights(cast(dict, mx.load(str(folder / "model.safetensors"))))  # a .safetensors file: a dict
    model.load_weights(list(weights.items()), strict=True)
    model.eval()  # no Dropout modules here, but eval() keeps any later-added one from firing (0.92 cosine if not)
    mx.eval(model.parameters())
    return model
