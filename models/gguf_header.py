"""What a GGUF file says about itself — metadata, each tensor's type and shape — read and checked before any tensor
is read or any model is built. Used by models.gguf.

Why here, first: the header decides everything after it. A tensor type MLX's reader does not decode exactly must go
to the gguf package (MLX 0.32 reads Q4_K as float16 with wrong values rather than refusing it: a Q4_K_M model then
"converted" fine and spoke garbage). And a header that lies — block_count = 10**9, an embedding narrower than the
tokenizer, a NaN rope_theta — made the converter build a model that ate memory without bound or one that could not
work; the same layer, size and vocabulary checks that guard an MLX folder (models.checks) run on it here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ModelError
from models.checks import MAX_DIMENSION, MOST_LAYERS, too_big_message
from models.registry import TOO_BIG, fit, kv_bytes_per_token, need_estimate

# Block types MLX's GGUF reader returns exactly (float, or its own affine triples for Q4_0/Q4_1/Q8_0), checked
# element-wise against the gguf package in tests/integration/test_gguf_quants.py. Every other type (Q4_K, Q6_K,
# Q5_0, …) is dequantized by the gguf package, whatever MLX would have done with it.
MLX_EXACT = frozenset({"F32", "F16", "Q4_0", "Q4_1", "Q8_0"})
_LAYER = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class TensorInfo:
    kind: str  # the GGML type's name: F32, Q4_K, …
    shape: tuple[int, ...]  # outermost first, as MLX and numpy hold it (GGUF lists it innermost first)


@dataclass(frozen=True)
class Header:
    meta: dict[str, Any]  # plain Python values: numbers, strings, lists
    tensors: dict[str, TensorInfo]
    reader: Any  # the gguf.GGUFReader, whose tensors are memory-mapped and read only when asked

    def mlx_reads_exactly(self) -> bool:
        return all(info.kind in MLX_EXACT for info in self.tensors.values())


def read_header(path: Path) -> Header:
    """The metadata and tensor table through the gguf package (memory-mapped: no tensor is read)."""
    try:
        import gguf
    except ImportError as exc:
        raise ModelError(f"Reading {path.name} needs the 'gguf' package (pip install gguf).") from exc
    try:
        reader = gguf.GGUFReader(str(path))
        meta = {field.name: _plain(field.contents()) for field in reader.fields.values()}
        tensors = {tensor.name: TensorInfo(tensor.tensor_type.name, tuple(int(n) for n in reversed(tensor.shape)))
                   for tensor in reader.tensors}
    except Exception as exc:  # a damaged header fails the reader in many ways
        raise ModelError(f"{path.name} could not be read as GGUF: the file is damaged or not a model Engram can "
                         f"read ({type(exc).__name__}).") from exc
    return Header(meta, tensors, reader)


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def check_header(header: Header, config: dict, path: Path, *, budget: int | None = None,
                 q_bits: int | None = 8) -> None:
    """Refuse, in one line, a header whose model could not be built or could not work, before anything is built."""
    _check_layers(header, config, path)
    _check_shapes(header, config, path)
    _check_vocabulary(header, config, path)
    _check_numbers(config, path)
    if budget is not None:
        need = need_estimate(converted_bytes(header, q_bits), kv_bytes_per_token(config),
                             int(config.get("max_position_embeddings", 0)))
        if fit(need, budget) == TOO_BIG:
            raise ModelError(too_big_message(need, budget))


def _check_layers(header: Header, config: dict, path: Path) -> None:
    held = {int(m[1]) for name in header.tensors if (m := _LAYER.match(name))}
    said = config["num_hidden_layers"]
    if said < 1 or said > (len(held) or MOST_LAYERS) or (held and max(held) >= said):
        raise ModelError(f"{path.name} says its model has {said} layers but holds weights for {len(held)}: "
                         "the file is damaged or was not written for one model.")


def _check_shapes(header: Header, config: dict, path: Path) -> None:
    """Each size the config is built from agrees with the tensors that have it, and no dimension is absurd."""
    for name, info in header.tensors.items():
        if not info.shape or not all(0 < n <= MAX_DIMENSION for n in info.shape):
            raise ModelError(f"{path.name} holds a tensor of impossible shape ({name}: {info.shape}); "
                             "the file is damaged.")
    head_dim = config["head_dim"]
    expected = {
        "token_embd.weight": (config["vocab_size"], config["hidden_size"]),
        "blk.0.attn_q.weight": (config["num_attention_heads"] * head_dim, config["hidden_size"]),
        "blk.0.attn_k.weight": (config["num_key_value_heads"] * head_dim, config["hidden_size"]),
        "blk.0.ffn_up.weight": (config["intermediate_size"], config["hidden_size"]),
    }
    for name, shape in expected.items():
        found = header.tensors.get(name)
        if found is None or found.shape != shape:
            held = found.shape if found else "nothing"
            raise ModelError(f"{path.name} describes a model its weights do not fit ({name} should be {shape}, the "
                             f"file holds {held}); the file is damaged or its metadata was edited.")


def _check_vocabulary(header: Header, config: dict, path: Path) -> None:
    tokens = header.meta.get("tokenizer.ggml.tokens") or []
    rows = config["vocab_size"]
    if not tokens:
        raise ModelError(f"{path.name} has no tokenizer.")
    if len(tokens) > rows:
        raise ModelError(f"{path.name}'s tokenizer has {len(tokens)} tokens but its model only {rows}: a token past "
                         f"{rows - 1} would have no meaning. The file is damaged or mixes two models.")
    for key in ("bos_token_id", "eos_token_id"):
        named = config.get(key, [])
        for token in named if isinstance(named, list) else [named]:
            if not 0 <= token < len(tokens):
                raise ModelError(f"{path.name} names token {token} as its {key[:3]} token but has {len(tokens)}.")


def _check_numbers(config: dict, path: Path) -> None:
    for key in ("rope_theta", "rms_norm_eps"):
        value = config.get(key)
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ModelError(f"{path.name} gives its model an impossible {key} ({value}); the file is damaged.")


def converted_bytes(header: Header, q_bits: int | None) -> int:
    """The converted folder's weights: the file's own bytes where MLX keeps its blocks, else float16 or q_bits."""
    elements = sum(math.prod(info.shape) for info in header.tensors.values())
    if q_bits == 32:
        return 4 * elements
    if q_bits in (4, 8):
        return elements * (q_bits + 1) // 8  # plus a scale and bias per group of 64
    if header.mlx_reads_exactly():
        return sum(int(tensor.n_bytes) for tensor in header.reader.tensors)
    return 2 * elements  # the gguf package's float16
