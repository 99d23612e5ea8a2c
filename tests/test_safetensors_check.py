"""models.checks.check_safetensors: a weights file whose header lies is refused before MLX's native reader, which
trusts it (a tensor of 2**31 × 2**31 elements in 0 bytes crashed the process when evaluated)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from core.errors import ModelError
from models.checks import check_safetensors


def _file(tmp_path, header: dict, data: bytes = b"\0" * 64):
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def _tensor(dtype="F32", shape=(4,), offsets=(0, 16)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def test_a_well_formed_file_passes(tmp_path):
    data = np.arange(6, dtype=np.float32).tobytes() + np.arange(2, dtype=np.int64).tobytes()
    check_safetensors(_file(tmp_path, {"__metadata__": {"format": "mlx"}, "a": _tensor(shape=(2, 3), offsets=(0, 24)),
                                       "b": _tensor("I64", (2,), (24, 40)), "empty": _tensor(shape=(0, 5),
                                                                                           offsets=(40, 40))}, data))


LIES = {
    "a shape past 32 bits, in no bytes": ({"w": _tensor(shape=(2 ** 31, 2 ** 31), offsets=(0, 0))}, "impossible shape"),
    "a shape whose product wraps to 0": ({"w": _tensor(shape=(2 ** 62, 4), offsets=(0, 0))}, "impossible shape"),
    "a negative dimension": ({"w": _tensor(shape=(-1,))}, "impossible shape"),
    "a dimension that is not a number": ({"w": _tensor(shape=("4",))}, "impossible shape"),
    "a true for a dimension": ({"w": _tensor(shape=(True,), offsets=(0, 4))}, "impossible shape"),
    "an unknown type": ({"w": _tensor(dtype="Q9")}, "unknown type 'Q9'"),
    "a range that does not fit the shape": ({"w": _tensor(shape=(8,), offsets=(0, 16))}, "needs 32 bytes"),
    "a reversed range": ({"w": _tensor(offsets=(40, 24))}, "needs 16 bytes"),
    "a range past the file": ({"w": _tensor(offsets=(10 ** 9, 10 ** 9 + 16))}, "ends at 1000000016"),
    "a range that is text": ({"w": {"dtype": "F32", "shape": [4], "data_offsets": "0-16"}}, "no byte range"),
    "a tensor with no description": ({"w": 7}, "no description"),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_header_that_lies_is_refused_in_one_line(tmp_path, lie):
    header, reason = LIES[lie]
    with pytest.raises(ModelError, match=r"^The weights file model\.safetensors is damaged or incomplete \(.*"
                                         + reason) as refused:
        check_safetensors(_file(tmp_path, header))
    assert "\n" not in str(refused.value)


def test_a_header_that_is_a_list_is_refused(tmp_path):
    raw = b"[1, 2, 3]"
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(ModelError, match="not a table of tensors"):
        check_safetensors(path)


def test_a_config_with_more_layers_than_the_weights_is_refused():
    from models.checks import check_layers
    names = [f"model.layers.{i}.mlp.up_proj.weight" for i in range(4)] + ["model.embed_tokens.weight"]
    check_layers({"num_hidden_layers": 4}, names)
    check_layers({"text_config": {"num_hidden_layers": 4}, "vision_config": {"num_hidden_layers": 99}}, names)
    for config in ({"num_hidden_layers": 10 ** 6}, {"text_config": {"num_hidden_layers": 5}}, {"n_layer": 5}):
        with pytest.raises(ModelError, match=r"config\.json says \d+ layers but its weights hold 4"):
            check_layers(config, names)
    other_naming = ["encoder.layer.0.attention.weight", "encoder.layer.1.attention.weight"]
    check_layers({"num_hidden_layers": 2}, other_naming)  # layers it cannot count: only an absurd number is refused
    with pytest.raises(ModelError, match="says 1000000 layers but its weights hold 0"):
        check_layers({"num_hidden_layers": 10 ** 6}, other_naming)
