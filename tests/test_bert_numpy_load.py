"""The numpy encoder reads its weights straight from the mapped safetensors file (models/bert_numpy.py): the same
tensors MLX loads, nothing copied, and a file that does not fit its config is a one-line error."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from models.bert_numpy import load_numpy_bert, read_safetensors
from models.embeddings import resolve_model_path


def _linked_copy(tmp_path: Path) -> Path:
    """The bundled MiniLM folder, linked file by file (a file replaced in the copy leaves the original alone)."""
    folder = tmp_path / "minilm"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), folder, copy_function=os.symlink)
    return folder


def test_the_mapped_tensors_are_the_ones_mlx_loads_and_read_only():
    import mlx.core as mx
    path = Path(resolve_model_path("all-MiniLM-L6-v2")) / "model.safetensors"
    ours, theirs = read_safetensors(path), mx.load(str(path))
    assert set(ours) == set(theirs)
    for name in ("embeddings.word_embeddings.weight", "encoder.layer.5.output.dense.bias"):
        assert np.array_equal(ours[name], np.array(theirs[name]))
    word = ours["embeddings.word_embeddings.weight"]
    assert not word.flags.writeable and not word.flags.owndata  # a view of the file, not a copy


def test_a_file_shorter_than_its_header_says_is_a_one_line_error(tmp_path):
    folder = _linked_copy(tmp_path)
    original = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").write_bytes(original[: len(original) // 2])
    with pytest.raises(ValueError, match=r"^model.safetensors is shorter than its header says$"):
        load_numpy_bert(folder)  # load_embedder turns it into a one-line ModelError (tests/test_embeddings.py)


def test_weights_that_do_not_fit_the_config_name_the_tensor(tmp_path):
    folder = _linked_copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 1024}))
    with pytest.raises(ValueError, match=r"^tensor encoder\.layer\.0\.intermediate\.dense\.weight is "
                                         r"\(1536, 384\), expected \(1024, 384\)$"):
        load_numpy_bert(folder)
