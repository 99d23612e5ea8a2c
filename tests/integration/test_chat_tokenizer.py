"""models.chat_tokenizer reads a folder's tokenizer as mlx-lm's TokenizerWrapper (over transformers) does: the same
prompt ids for the same chat, the same control markers and eos ids, the same decoded and streamed text. On the
tiny test model, the real SmolLM2 conversion, tokenizers carrying four families' special tokens and chat
templates, and tokenizers written from GGUF metadata (models.gguf_tokenizer) with each pre-tokenizer it knows.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from models.chat_tokenizer import ChatTokenizer, load_tokenizer
from models.gguf_tokenizer import PRE_TOKENIZERS, write_tokenizer
from models.prompt_text import control_ids, control_markers, render_prompt
from tests.test_prompt_tokens import FAMILIES, HOSTILE, _tokenizer

TEXTS = ("Hello, world!", " leading space", "a ,b", "Ünïcødé — naïve café, 東京, 😀👍🏽", "x\n\ny  z\t",
         '{"facts": [{"subject": "Ana", "confidence": 90}]}', "It's 12:45 and I'm fine; aren't you?", "")
CHATS = (
    [{"role": "user", "content": "hello"}],
    [{"role": "system", "content": "You remember things."}, {"role": "user", "content": "Where does Ana live?"},
     {"role": "assistant", "content": "In Lisbon."}, {"role": "user", "content": TEXTS[3]}],
    [{"role": "system", "content": f"Memories:\n{HOSTILE}"}, {"role": "user", "content": HOSTILE}],
)


def _pair(folder: Path) -> tuple[ChatTokenizer, object]:
    from mlx_lm.utils import load_tokenizer as mlx_lm_load_tokenizer
    from models.mlx_loader import load_config
    eos = load_config(folder).get("eos_token_id") if (folder / "config.json").is_file() else None
    ours = load_tokenizer(folder, eos_token_ids=eos)
    assert isinstance(ours, ChatTokenizer)  # not mlx-lm's, which it falls back to for folders it cannot read
    return ours, mlx_lm_load_tokenizer(folder, eos_token_ids=eos)


def _streamed(tokenizer, ids: list[int]) -> list[str]:
    detokenizer = tokenizer.detokenizer
    pieces = []
    for token in ids:
        detokenizer.add_token(token)
        pieces.append(detokenizer.last_segment)
    detokenizer.finalize()
    return pieces + [detokenizer.last_segment]


def _assert_same(folder: Path) -> None:
    ours, theirs = _pair(folder)
    markers = control_markers(theirs)
    assert control_markers(ours) == markers
    assert set(control_ids(ours)) == set(control_ids(theirs))
    assert ours.eos_token_ids == theirs.eos_token_ids and ours.eos_token_id == theirs.eos_token_id
    assert (ours.bos_token, ours.eos_token, ours.pad_token) == (theirs.bos_token, theirs.eos_token, theirs.pad_token)
    assert ours.vocab == theirs.vocab and len(ours) == len(theirs)
    assert type(ours.detokenizer).__name__ == type(theirs.detokenizer).__name__
    for chat in CHATS:
        assert render_prompt(ours, chat, markers) == render_prompt(theirs, chat, markers)
        assert ours.apply_chat_template(chat, add_generation_prompt=True, tokenize=False) == \
            theirs.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    rng = random.Random(7)
    for text in TEXTS:
        for special in (True, False):
            assert ours.encode(text, add_special_tokens=special) == list(theirs.encode(text,
                                                                                  add_special_tokens=special))
        ids = ours.encode(text, add_special_tokens=False)
        assert ours.decode(ids) == theirs.decode(ids)
        assert _streamed(ours, ids) == _streamed(theirs, ids)
        noise = [rng.randrange(len(ours)) for _ in range(40)]  # any ids a sampler may pick, split bytes included
        assert _streamed(ours, noise) == _streamed(theirs, noise)
        assert ours.decode(noise, skip_special_tokens=True) == theirs.decode(noise, skip_special_tokens=True)


def test_the_tiny_models_tokenizer_reads_the_same(tiny_model_dir):
    _assert_same(tiny_model_dir)


def test_the_real_models_tokenizer_reads_the_same(real_model_dir):
    _assert_same(real_model_dir)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_familys_tokens_and_template_read_the_same(family, tmp_path):
    _tokenizer(family).save_pretrained(str(tmp_path))
    _assert_same(tmp_path)


@pytest.mark.parametrize("pre", PRE_TOKENIZERS)
def test_a_tokenizer_written_from_gguf_metadata_reads_the_same(pre, tiny_model_dir, tmp_path):
    raw = json.loads((tiny_model_dir / "tokenizer.json").read_text())
    vocab = raw["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    specials = {t["content"] for t in raw["added_tokens"]}
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.merges": [m if isinstance(m, str) else " ".join(m) for m in raw["model"]["merges"]],
            "tokenizer.ggml.token_type": [3 if t in specials else 1 for t in tokens],
            "tokenizer.ggml.eos_token_id": tokens.index("<|im_end|>"), "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.add_bos_token": pre == "llama-bpe", "general.architecture": "qwen2",
            "tokenizer.chat_template": (tiny_model_dir / "chat_template.jinja").read_text()}
    write_tokenizer(tmp_path, meta)
    _assert_same(tmp_path)


def test_a_folder_it_cannot_read_gets_mlx_lms_tokenizer(tiny_model_dir, tmp_path):
    for path in tiny_model_dir.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template_type": "deepseek_v32"}))
    tokenizer = load_tokenizer(tmp_path)
    assert not isinstance(tokenizer, ChatTokenizer) and type(tokenizer).__name__ == "TokenizerWrapper"


@pytest.mark.parametrize("expression, refused", [('"  " * 4', False), ("[1] * 3", False), ("2 ** 10", False),
                                                 ('("a" * 100000) * 100000', True), ("9 ** 9 ** 9", True),
                                                 ("[0] * 10 ** 7", True)])
@pytest.mark.parametrize("own_tokenizer", [True, False])
def test_a_chat_templates_repetition_and_powers_stay_small(tiny_model_dir, tmp_path, expression, refused,
                                                           own_tokenizer):
    """A template ships in the model file, from anyone: one that builds a 10 GB string is refused in words, before
    it takes the machine's memory; an ordinary indent or power renders. Also in a folder Engram reads through
    mlx-lm's tokenizer (here: one that names its own tokenizer code), whose template transformers would render in a
    sandbox that bounds neither."""
    from core.errors import ModelError
    folder = _with_template(tiny_model_dir, tmp_path, "{{ (" + expression + ") | string | length }}"
                                                      "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    if not own_tokenizer:
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["auto_map"] = {"AutoTokenizer": ["tokenization_custom.CustomTokenizer", None]}  # never run
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = load_tokenizer(folder)
    assert isinstance(tokenizer, ChatTokenizer) == own_tokenizer
    messages = [{"role": "user", "content": "hello"}]
    if refused:
        with pytest.raises(ModelError, match="chat template refused the conversation: the chat template computes "
                                             "something too large"):
            render_prompt(tokenizer, messages, control_markers(tokenizer))
    else:
        assert render_prompt(tokenizer, messages, control_markers(tokenizer))


LOOPING = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
           "{% for m in messages %}{{ m['content'] }}{% endfor %}")


def _with_template(tiny_model_dir, tmp_path, template: str) -> Path:
    import shutil
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


@pytest.fixture
def fast_deadline(monkeypatch):
    """The chat's render deadline (RENDER_SECONDS, 5 s) read on a clock running 10x fast: the same guard and words,
    reached after 0.5 s of looping instead of 5 s of waiting (the deadline's `clock` parameter, as in
    tests/test_template_deadline.py)."""
    import time

    from models import prompt_text, template_deadline

    def within_deadline(render, seconds: float = template_deadline.RENDER_SECONDS):
        return template_deadline.within_deadline(render, seconds, clock=lambda: 10 * time.monotonic())
    monkeypatch.setattr(prompt_text, "within_deadline", within_deadline)


def _finishes(work, seconds: float = 60.0):
    """work() run on a thread: what it returned or raised, or a failure if it is still running after `seconds`."""
    import threading
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except Exception as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the chat template was still rendering"
    return outcome


@pytest.mark.parametrize("own_tokenizer", [True, False])
def test_a_chat_template_that_loops_for_ever_is_stopped_in_words(tiny_model_dir, tmp_path, own_tokenizer,
                                                                  fast_deadline):
    """Nested loops of 10**10 steps pass every size bound (each range is small): the render has a deadline, on
    Engram's tokenizer and on mlx-lm's (transformers renders that one), and the chat says so in one line."""
    from mlx_lm.utils import load_tokenizer as mlx_lm_load_tokenizer

    from core.errors import ModelError
    folder = _with_template(tiny_model_dir, tmp_path, LOOPING)
    tokenizer = load_tokenizer(folder) if own_tokenizer else mlx_lm_load_tokenizer(folder)
    outcome = _finishes(lambda: render_prompt(tokenizer, [{"role": "user", "content": "hello"}], ()))
    assert isinstance(outcome.get("error"), ModelError)
    assert "did not finish" in str(outcome["error"]) and "\n" not in str(outcome["error"])
    quick = _with_template(tiny_model_dir, tmp_path / "quick", "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert render_prompt(load_tokenizer(quick), [{"role": "user", "content": "hello"}], ())  # the deadline is gone


def test_a_model_whose_chat_template_loops_is_not_installed(tiny_model_dir, tmp_path, fast_deadline):
    """verify_loads renders a conversation as the chat will: a template that never finishes is refused at install,
    not found on the first message."""
    from core.errors import ModelError
    from models.checks import verify_loads
    folder = _with_template(tiny_model_dir, tmp_path, LOOPING)
    outcome = _finishes(lambda: verify_loads(folder))
    assert isinstance(outcome.get("error"), ModelError) and str(outcome["error"]) == (
        "This model cannot chat: its chat template failed on a sample conversation (it did not finish within 5 s).")
    verify_loads(tiny_model_dir)
