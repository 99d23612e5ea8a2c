"""A small ONNX graph written straight to protobuf's wire format, for onnxruntime to run.

Why not the `onnx` package: it is 31 MB installed for the few messages a graph of plain operators needs, and only
its serialisation would be used. The field numbers are onnx.proto's (ModelProto, GraphProto, NodeProto,
AttributeProto, TensorProto, ValueInfoProto); the large weights never pass through here — they are handed to
onnxruntime as arrays (models/bert_onnx.py), so this writes only the graph and its few small constants.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from numpy.typing import DTypeLike

IR_VERSION = 8  # ONNX 1.10's format: onnxruntime reads it, and opset 17 (LayerNormalization) is within it
OPSET = 17
ELEMENT_TYPES = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7}
_FLOAT, _INT, _INTS = 1, 2, 7  # AttributeProto.AttributeType


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(int(value))


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _key(number, 2) + _varint(len(data)) + data


def _float(number: int, value: float) -> bytes:
    return _key(number, 5) + struct.pack("<f", value)


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto holding the array's bytes (little-endian, as every platform Engram runs on)."""
    array = np.ascontiguousarray(array)
    return (b"".join(_int(1, d) for d in array.shape) + _int(2, ELEMENT_TYPES[array.dtype])
            + _bytes(8, name) + _bytes(9, array.tobytes()))


def external_tensor(name: str, dtype: np.dtype, shape: Sequence[int]) -> bytes:
    """A TensorProto that names its data as external: onnxruntime takes the array itself at load
    (SessionOptions.add_external_initializers), so the weights are never serialised."""
    location = _bytes(1, "location") + _bytes(2, name)  # StringStringEntryProto; the file is never opened
    return (b"".join(_int(1, d) for d in shape) + _int(2, ELEMENT_TYPES[np.dtype(dtype)]) + _bytes(8, name)
            + _bytes(13, location) + _int(14, 1))


def value_info(name: str, dtype: DTypeLike, shape: Sequence[int | str]) -> bytes:
    """A ValueInfoProto: a graph input or output, each axis a size or a named free one."""
    dims = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in shape)
    tensor_type = _int(1, ELEMENT_TYPES[np.dtype(dtype)]) + _bytes(2, dims)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def _attribute(name: str, value: int | float | Sequence[int]) -> bytes:
    if isinstance(value, float):
        return _bytes(1, name) + _float(2, value) + _int(20, _FLOAT)
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, _INT)
    return _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _INTS)


@dataclass
class Graph:
    """Nodes added in order, each output named after its node; `model()` is the serialised ModelProto."""
    name: str
    nodes: list[bytes] = field(default_factory=list)
    constants: list[bytes] = field(default_factory=list)
    inputs: list[bytes] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)

    def constant(self, name: str, array: np.ndarray) -> str:
        self.constants.append(tensor(name, array))
        return name

    def external(self, name: str, array: np.ndarray) -> str:
        self.constants.append(external_tensor(name, array.dtype, array.shape))
        return name

    def node(self, op: str, inputs: Sequence[str], output: str | None = None,
             **attributes: int | float | Sequence[int]) -> str:
        output = output or f"{op.lower()}{len(self.nodes)}"
        self.nodes.append(b"".join(_bytes(1, i) for i in inputs) + _bytes(2, output) + _bytes(3, output)
                          + _bytes(4, op) + b"".join(_bytes(5, _attribute(k, v)) for k, v in attributes.items()))
        return output

    def model(self) -> bytes:
        graph = (b"".join(_bytes(1, n) for n in self.nodes) + _bytes(2, self.name)
                 + b"".join(_bytes(5, c) for c in self.constants)
                 + b"".join(_bytes(11, i) for i in self.inputs) + b"".join(_bytes(12, o) for o in self.outputs))
        return _int(1, IR_VERSION) + _bytes(2, "engram") + _bytes(7, graph) + _bytes(8, _int(2, OPSET))
