"""`engram models add PATH` (issue 38 #6): a .gguf file or a model folder from the terminal, converted through the
same code path as the app's "Add a GGUF file…", with progress; a path relative to where the command runs works
(the conversion worker runs in another folder); `models use FILE.gguf` says what to do.

The file converted here is the tiny model written as llama.cpp writes a qwen2 GGUF (a few seconds through the worker):
the real SmolLM2 file goes through the same conversion in tests/test_gui_models.py and tests/integration."""
from __future__ import annotations


import pytest

from core.config import load_settings


def test_a_relative_gguf_path_is_converted_with_progress_and_chosen(cli, tmp_path, monkeypatch):
    pytest.importorskip("models.gguf")
    from models.testing import build_tiny_model
    from tests.integration.test_gguf_convert import write_qwen2_gguf
    work = tmp_path / "Downloads"
    work.mkdir()
    write_qwen2_gguf(build_tiny_model(tmp_path / "float", quantize_bits=None), work / "smol.gguf")
    monkeypatch.chdir(work)
    code, out, err = cli("models", "add", "smol.gguf")
    assert code == 0, err
    assert "Converting smol.gguf to MLX: " in err and "100.0%" in err  # progress, to the end
    assert out.splitlines()[0].startswith("Added gguf/smol (")
    assert load_settings(cli.data_dir).chat_model == "gguf/smol"  # the first model added: Engram chats with it
    assert (work / "smol.gguf").is_file()  # the user's file is only read


def test_a_relative_path_reaches_the_worker_and_a_refusal_is_one_line(cli, tmp_path, monkeypatch):
    pytest.importorskip("models.gguf")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "holiday.gguf").write_bytes(b"JFIF not a model")
    code, out, err = cli("models", "add", "holiday.gguf")
    assert code != 0 and err.strip().splitlines()[-1] == "engram: holiday.gguf is not a GGUF model file."
    assert load_settings(cli.data_dir).chat_model == ""


def test_bad_paths_are_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    code, _out, err = cli("models", "add", "missing.gguf")
    assert code != 0 and err.strip() == "engram: there is no file or folder missing.gguf"
    code, _out, err = cli("models", "add", "notes.txt")
    assert code != 0 and err.strip() == "engram: notes.txt is neither a model folder nor a .gguf file"


def test_models_use_with_a_gguf_file_says_what_to_do(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Qwen.gguf").write_bytes(b"GGUF")
    code, _out, err = cli("models", "use", "Qwen.gguf")
    assert code != 0
    assert err.strip() == ("engram: Qwen.gguf is a GGUF file: add it first with `engram models add Qwen.gguf` (it is "
                           "converted to MLX), then choose it with `engram models use gguf/Qwen`")
