"""Turn a .gguf file into an MLX model folder that mlx-lm loads: config.json, weights, tokenizer files.

One code path serves the test model (models/testing_real.py) and a user's "Add a GGUF file…", which runs it in a
worker process (models/gguf_worker.py: MLX's native reader crashes on some damaged or hostile files).

Route, and why: the header is read first (models.gguf_header, through the small `gguf` package, which memory-maps
the file and reads no tensor) and checked — layers, sizes, vocabulary, memory — before anything is read or built.
Its tensor types then choose the reader. MLX reads GGUF itself: `mx.load` returns Q4_0, Q4_1 and Q8_0 as MLX's own
affine-quantized triples (weight, scales, biases, groups of 32), which is exactly how GGUF stores them, so nothing
is lost. Every other type goes through the gguf package, which dequantizes it with numpy: MLX 0.32 reads Q4_K
blocks without complaint and returns wrong values (a Q4_K_M model converted "successfully" and spoke garbage), so
it is never asked about a type it is not known to decode exactly (tests/integration/test_gguf_quants.py).
The transformers route (`gguf_file=`) needs torch and accelerate and writes `rope_parameters` mlx-lm does not read.

llama.cpp stores llama-architecture q/k projections permuted for its interleaved rotary embedding; rather than
un-permute them, the config sets mlx-lm's `rope_traditional`, which is that same interleaved form. Llama 3.1+
files carry their rotary scaling as a table (`rope_freqs`); it is matched back to mlx-lm's llama3 rope_scaling,
and refused if no usual setting reproduces it.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, cast

from core.errors import ModelError
from models.gguf_families import FAMILIES, family_config, shift_norms
from models.gguf_header import Header, check_header, read_header
from models.gguf_tokenizer import scalar, write_tokenizer

Progress = Callable[[str, float], None]  # (stage, fraction done 0..1)
ARCHITECTURES = tuple(FAMILIES)
Q_BITS = (None, 4, 8, 32)  # 32: unquantized float32, the fastest where a fast BLAS serves MLX's CPU backend
GGUF_GROUP = 32  # every GGUF block type MLX reads holds 32 weights per scale
QUANT_GROUP = 64  # mlx-lm's default when Engram quantizes itself

_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias|scales|biases)$")
_TOP = re.compile(r"^([a-z_]+)\.(weight|bias|scales|biases)$")


@dataclass(frozen=True)
class Converted:
    folder: Path
    architecture: str
    parameters: int
    bits: int | None  # None: the GGUF's own quantization kept as is


def convert(gguf_path: Path | str, out_dir: Path | str, *, progress: Progress | None = None,
            q_bits: int | None = 8, budget: int | None = None) -> Converted:
    """Write an mlx-lm model folder for `gguf_path` at `out_dir` (which must not exist yet).

    q_bits=None keeps the file's quantization where MLX holds it natively (lossless for Q4_0/Q4_1/Q8_0);
    4 or 8 re-quantizes every matrix with MLX (groups of 64); 32 writes every weight as float32 (4× the 8-bit
    size). `budget` is the memory a model may use (models.budget): a model past it is refused from the header, before
    anything is read. The folder appears whole or not at all.
    """
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    report = progress or (lambda stage, fraction: None)
    if q_bits not in Q_BITS:
        raise ModelError(f"q_bits must be 4, 8, 32 (float32) or None (keep the file's own), not {q_bits!r}.")
    _check_paths(gguf_path, out_dir)
    report("reading", 0.0)
    header = read_header(gguf_path)
    architecture = _architecture(header.meta, gguf_path)
    try:
        config = model_config(header.meta, architecture, has_output="output.weight" in header.tensors)
    except (TypeError, ValueError, KeyError) as exc:  # a size missing from the metadata, or not a number
        raise ModelError(f"{gguf_path.name} does not describe its model fully ({exc}); it cannot be converted.") \
            from exc
    if "token_embd.weight" in header.tensors:  # the embedding's rows, not the token list, size the model
        config["vocab_size"] = header.tensors["token_embd.weight"].shape[0]
    check_header(header, config, gguf_path, budget=budget, q_bits=q_bits)  # before any tensor is read or built
    weights, meta = read_gguf(gguf_path, progress=lambda done: report("reading", 0.3 * done), header=header)
    if "rope_freqs.weight" in weights:
        config["rope_scaling"] = llama3_rope_scaling(weights.pop("rope_freqs.weight"), config, gguf_path)
    report("converting", 0.3)
    weights = {mlx_name(name, architecture): value for name, value in weights.items()}
    weights = shift_norms(FAMILIES[architecture], weights)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=out_dir.parent))
    try:
        bits = _write_weights(staging, weights, config, q_bits, report)
        report("tokenizer", 0.9)
        write_tokenizer(staging, meta, chat_template=FAMILIES[architecture].chat_template)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report("done", 1.0)
    return Converted(out_dir, architecture, _parameter_count(weights), bits)


def _check_paths(gguf_path: Path, out_dir: Path) -> None:
    if not gguf_path.is_file():
        raise ModelError(f"{gguf_path} is not a file.")
    with gguf_path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ModelError(f"{gguf_path.name} is not a GGUF model file.")
    if out_dir.exists():
        raise ModelError(f"{out_dir} already exists; choose a new folder for the converted model.")
    if not out_dir.parent.is_dir():
        raise ModelError(f"{out_dir.parent} is not a folder.")


# -- reading ---------------------------------------------------------------------------------------

def read_gguf(path: Path, *, progress: Callable[[float], None] | None = None,
              header: Header | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors by GGUF name, metadata). The header's tensor types choose the reader: MLX's own when it decodes
    every one of them exactly (models.gguf_header.MLX_EXACT), else the gguf package for the whole file."""
    header = header or read_header(path)
    if not header.mlx_reads_exactly():
        return _read_dequantized(path, progress or (lambda done: None), header), header.meta
    import mlx.core as mx
    try:
        return cast(dict[str, Any], mx.load(str(path))), header.meta  # a .gguf file: a dict of arrays
    except (RuntimeError, ValueError) as exc:
        raise ModelError(f"{path.name} could not be read as GGUF: {exc}") from exc


def _read_dequantized(path: Path, progress: Callable[[float], None],
                      header: Header | None = None) -> dict[str, Any]:
    """Every tensor dequantized to float16 (float32 for vectors) with the gguf package (numpy)."""
    reader = (header or read_header(path)).reader
    weights = {}
    for index, tensor in enumerate(reader.tensors):
        progress(index / len(reader.tensors))  # dequantizing a large file takes minutes: say how far it is
        weights[tensor.name] = dequantized_tensor(tensor, path)
    return weights


def dequantized_tensor(tensor: Any, path: Path) -> Any:
    """One tensor of a gguf.GGUFReader as MLX float16 (float32 for a vector), decoded by the gguf package."""
    import gguf
    import mlx.core as mx
    import numpy as np
    try:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    except NotImplementedError as exc:
        raise ModelError(f"{path.name} uses {tensor.tensor_type.name} weights, which cannot be converted yet.") from exc
    except (ValueError, TypeError) as exc:  # a tensor's bytes do not fill its shape: a damaged file
        raise ModelError(f"{path.name} could not be read as GGUF: tensor {tensor.name}: {exc}") from exc
    shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists dimensions innermost first
    dtype = np.float32 if len(shape) == 1 else np.float16
    return mx.array(np.asarray(values, dtype=dtype).reshape(shape))


def _architecture(meta: dict, path: Path) -> str:
    architecture = scalar(meta, "general.architecture", "")
    if architecture not in ARCHITECTURES:
        raise ModelError(f"{path.name} is a {architecture or 'unknown'} model; Engram converts "
                         f"{', '.join(ARCHITECTURES)} models (SmolLM2, Llama, Qwen2.5, Qwen3, Gemma 3) from GGUF.")
    if scalar(meta, f"{architecture}.rope.scaling.type") not in (None, "", "none"):
        raise ModelError(f"{path.name} uses {scalar(meta, f'{architecture}.rope.scaling.type')} rotary scaling, "
                         f"which cannot be converted from GGUF yet; download the MLX version instead.")
    return architecture


def llama3_rope_scaling(table: Any, config: dict, path: Path) -> dict:
    """mlx-lm's rope_scaling for the per-frequency table llama.cpp stores for Llama 3.1+ (`rope_freqs`).

    The table is the llama3 rule evaluated for one set of parameters; the usual ones are tried and must
    reproduce it, or the file is refused rather than run with rotary embeddings that are subtly wrong.
    """
    import mlx.core as mx
    import numpy as np
    table = np.array(table.astype(mx.float32))
    dims = config["head_dim"]
    periods = config["rope_theta"] ** (np.arange(0, dims, 2) / dims)
    wavelengths = 2 * np.pi * periods
    for factor in (8.0, 16.0, 32.0, 4.0, 2.0):
        scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192}
        low, high = 8192 / 1.0, 8192 / 4.0
        smooth = (8192 / wavelengths - 1.0) / (4.0 - 1.0)
        expected = np.where(wavelengths > low, factor,
                            np.where(wavelengths < high, 1.0, 1.0 / ((1 - smooth) / factor + smooth)))
        if table.shape == expected.shape and np.allclose(table, expected, rtol=1e-3):
            return scaling
    raise ModelError(f"{path.name} scales its rotary embeddings in a way Engram cannot reproduce; "
                     f"download the MLX version instead.")


def model_config(meta: dict, architecture: str, *, has_output: bool) -> dict:
    """config.json for mlx-lm from the GGUF metadata; rope_theta is always written (mlx-lm defaults to 1e4)."""
    def get(key: str, default: Any = None) -> Any:
        return scalar(meta, f"{architecture}.{key}", default)

    heads = int(get("attention.head_count"))
    hidden = int(get("embedding_length"))
    tokens = meta.get("tokenizer.ggml.tokens") or []
    config = {
        "model_type": architecture,
        "hidden_size": hidden,
        "num_hidden_layers": int(get("block_count")),
        "intermediate_size": int(get("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(get("attention.head_count_kv", heads)),
        "head_dim": int(get("attention.key_length", hidden // heads)),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        "vocab_size": int(get("vocab_size", len(tokens))),
        "max_position_embeddings": int(get("context_length", 4096)),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "tie_word_embeddings": not has_output,
    }
    for key, name in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id")):
        if f"tokenizer.ggml.{name}" in meta:
            config[key] = int(scalar(meta, f"tokenizer.ggml.{name}"))
    return family_config(FAMILIES[architecture], architecture, meta, config)


def mlx_name(gguf_name: str, architecture: str = "llama") -> str:
    """blk.3.attn_q.weight → model.layers.3.self_attn.q_proj.weight (and the top-level tensors)."""
    block = _BLOCK.match(gguf_name)
    layers = FAMILIES[architecture].layers
    if block and block.group(2) in layers:
        return f"model.layers.{block.group(1)}.{layers[block.group(2)]}.{block.group(3)}"
    top = _TOP.match(gguf_name)
    if top and top.group(1) in _TOP_NAMES:
        return f"{_TOP_NAMES[top.group(1)]}.{top.group(2)}"
    raise ModelError(f"The GGUF file holds a tensor Engram does not know ({gguf_name}); it cannot be converted.")


# -- writing weights -------------------------------------------------------------------------------

def _write_weights(folder: Path, weights: dict, config: dict, q_bits: int | None, report: Progress) -> int | None:
    import mlx.core as mx
    if q_bits is None:
        native = _native_quantization(weights)
        if native:  # an F16/F32 file stays unquantized
            config["quantization"] = native
        model = _build_model(config, weights)
    elif q_bits == 32:
        model = _build_model(config, {name: value.astype(mx.float32) for name, value in _dequantized(weights).items()})
    else:
        model = _build_model(config, _dequantized(weights))
        report("quantizing", 0.6)
        _quantize(model, config, q_bits)
    mx.eval(model.parameters())
    from mlx_lm.utils import save_config, save_model
    save_model(folder, model)
    save_config(config, folder / "config.json")
    return q_bits


def _native_quantization(weights: dict) -> dict:
    """mlx-lm's quantization entry for the file's own blocks, per layer where bit widths differ."""
    bits = {}
    for name, scales in weights.items():
        if name.endswith(".scales"):
            layer = name[: -len(".scales")]
            bits[layer] = weights[f"{layer}.weight"].shape[-1] // scales.shape[-1]
    if not bits:
        return {}
    common = max(set(bits.values()), key=list(bits.values()).count)
    entry: dict[str, Any] = {"group_size": GGUF_GROUP, "bits": common}
    entry.update({layer: {"group_size": GGUF_GROUP, "bits": b} for layer, b in bits.items() if b != common})
    return entry


def _dequantized(weights: dict) -> dict:
    import mlx.core as mx
    plain = {}
    for name, value in weights.items():
        if name.endswith((".scales", ".biases")):
            continue
        layer = name[: -len(".weight")] if name.endswith(".weight") else ""
        if layer and f"{layer}.scales" in weights:
            scales = weights[f"{layer}.scales"]
            bits = value.shape[-1] // scales.shape[-1]
            value = mx.dequantize(value, scales, weights[f"{layer}.biases"], group_size=GGUF_GROUP, bits=bits)
        plain[name] = value.astype(mx.float16) if value.ndim > 1 else value.astype(mx.float32)
    return plain


def _build_model(config: dict, weights: dict) -> Any:
    import mlx.nn as nn
    from models.mlx_loader import model_classes  # the lookup the chat engine loads with
    model_class, args_class = model_classes(config)
    model = model_class(args_class.from_dict(config))
    if hasattr(model, "sanitize"):  # mlx-lm's own fix-ups on load (Gemma 3 ties its output to the embedding here)
        weights = model.sanitize(dict(weights))
    quantization = config.get("quantization")
    if quantization:
        def predicate(path: str, module: Any) -> Any:
            if path in quantization:
                return quantization[path]
            return hasattr(module, "to_quantized") and f"{path}.scales" in weights
        nn.quantize(model, group_size=quantization["group_size"], bits=quantization["bits"],
                    class_predicate=predicate)
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as exc:
        raise ModelError(f"The GGUF tensors do not fit a {config['model_type']} model: {exc}") from exc
    return model


def _quantize(model: Any, config: dict, bits: int) -> None:
    import contextlib
    import io
    from mlx_lm.utils import quantize_model
    with contextlib.redirect_stdout(io.StringIO()):  # quantize_model prints bits per weight
        _, quantized = quantize_model(model, config, group_size=QUANT_GROUP, bits=bits)
    config.clear()
    config.update(quantized)


def _parameter_count(weights: dict) -> int:
    total = 0
    for name, value in weights.items():
        if name.endswith((".scales", ".biases")):
            continue
        layer = name[: -len(".weight")]
        scales = weights.get(f"{layer}.scales")
        per_element = 32 // (value.shape[-1] // scales.shape[-1]) if scales is not None else 1
        total += value.size * per_element
    return total
