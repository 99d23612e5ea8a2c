"""A hostile tokenizer.json regex (issue 37, item 8): the Rust tokenizers library panics when a regex with nested
repetition runs past Oniguruma's retry limit, and the raw panic ended the chat. A tokenizer that panics on sample
text is refused when the model is added; one that panics only on some later text fails that turn in one clear line,
without Rust's own panic lines, and the chat goes on."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ModelError
from models.chat_tokenizer import load_tokenizer
from models.checks import verify_loads
from models.download import ModelStore
from models.registry import GB

ROOT = Path(__file__).resolve().parents[2]


def hostile_copy(tiny_model_dir: Path, where: Path, letter: str) -> Path:
    """The tiny model with a pre-tokenizer regex that panics on a long run of `letter`."""
    folder = where / f"hostile-{letter}"
    shutil.copytree(tiny_model_dir, folder)
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    tokenizer["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": f"({letter}|{letter}?)+$"},
                                  "behavior": "Isolated", "invert": False}
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    return folder


def test_a_tokenizer_that_panics_on_sample_text_is_refused_when_added(tmp_path, tiny_model_dir, capfd):
    folder = hostile_copy(tiny_model_dir, tmp_path, "a")
    store = ModelStore(tmp_path / "models", total_ram=16 * GB)
    with pytest.raises(ModelError, match="tokenizer fails on sample text"):
        store.add_folder(folder)
    with pytest.raises(ModelError, match="tokenizer fails on sample text"):
        verify_loads(folder)  # a download's install check
    assert store.added_folders() == [] and "panicked" not in capfd.readouterr().err


def test_a_panic_on_later_text_is_one_model_error_and_no_rust_lines(tmp_path, tiny_model_dir, capfd):
    tokenizer = load_tokenizer(hostile_copy(tiny_model_dir, tmp_path, "q"))
    assert tokenizer.encode("Hello there")
    capfd.readouterr()
    with pytest.raises(ModelError, match="tokenizer failed on this text"):
        tokenizer.encode("q" * 40 + "!")
    assert capfd.readouterr().err == ""
    assert tokenizer.encode("Hello again")  # the tokenizer still works for other text


def test_the_chat_says_one_line_and_goes_on(tmp_path, tiny_model_dir):
    folder = hostile_copy(tiny_model_dir, tmp_path, "q")
    done = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data"), "chat", "--model",
                           str(folder), "--max-tokens", "4", "--no-memory"],
                          input="q" * 40 + "!\nHello\n", capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "panicked" not in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.count("tokenizer failed on this text") == 1
    assert done.stdout.count("engram> ") >= 2  # the next message was answered
