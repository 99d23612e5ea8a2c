"""A user's .gguf file is converted in a worker process: a file that crashes MLX's native GGUF reader (found by
feeding it corrupted copies of a real model) is refused in one line, and the app's process lives on."""
from __future__ import annotations

import struct

import pytest

from core.errors import ModelError
from models.gguf_worker import convert_isolated, crash_message


def _header(tensors: int, keys: int, rest: bytes = b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, keys) + rest


HOSTILE = {
    "a tensor count of 2**40": _header(2 ** 40, 0),  # the reader segfaults
    "a tensor with 2**31 dimensions": _header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<I", 2 ** 31)),  # aborts
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_file_that_crashes_the_reader_is_refused_and_leaves_nothing(tmp_path, what):
    path = tmp_path / "model.gguf"
    path.write_bytes(HOSTILE[what])
    stages = []
    # the header is now read and checked (models.gguf_header) before MLX's native reader sees the file, so these are
    # refused by that check; were one to pass it, the worker's crash is still said in one line
    with pytest.raises(ModelError, match=r"^model\.gguf could not be read") as info:
        convert_isolated(path, tmp_path / "out", progress=lambda stage, fraction: stages.append(stage))
    assert "\n" not in str(info.value)
    assert stages == ["reading"]  # the worker's progress reached us before it died
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_a_refusal_inside_the_worker_is_said_as_convert_says_it(tmp_path):
    path = tmp_path / "holiday.gguf"
    path.write_bytes(b"JFIF not a model")
    with pytest.raises(ModelError, match=r"^holiday\.gguf is not a GGUF model file\.$"):
        convert_isolated(path, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["holiday.gguf"]


def test_a_worker_that_stops_without_a_word_is_said_too():
    assert crash_message("m.gguf", 1, "MemoryError") == (
        "m.gguf could not be read: the GGUF reader stopped (MemoryError). The file is damaged or not a model Engram "
        "can read; nothing was installed.")
