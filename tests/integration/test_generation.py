"""models.generation yields what mlx_lm.stream_generate yields: the same tokens, text pieces and finish reasons, greedy
or sampled under one seed, with a prompt cache, a prompt read in several chunks and a grammar's logits processor."""
from __future__ import annotations

import mlx.core as mx
import pytest

from core.protocols import ChatMessage
from models import generation
from models.chat_tokenizer import load_tokenizer
from models.generation import new_stream, stream_pieces
from models.mlx_loader import load_model

CHAT = [ChatMessage("system", "You remember what the user tells you."),
        ChatMessage("user", "My dog is called Biscuit and I live in Lisbon. What do you know about me?")]


def _ours(model, tokenizer, prompt, *, temp=0.0, seed=None, cache=None, processors=(), max_tokens=40):
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.sample_utils import make_sampler
    if seed is not None:
        mx.random.seed(seed)
    pieces = stream_pieces(model, tokenizer, mx.array(prompt), cache=cache or make_prompt_cache(model),
                           stream=new_stream(), max_tokens=max_tokens, sampler=make_sampler(temp=temp),
                           logits_processors=list(processors))
    return [(p.token, p.text, p.finish_reason) for p in pieces]


def _theirs(model, tokenizer, prompt, *, temp=0.0, seed=None, cache=None, processors=(), max_tokens=40,
            prefill_step_size=2048):
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler
    if seed is not None:
        mx.random.seed(seed)
    return [(r.token, r.text, r.finish_reason) for r in stream_generate(
        model, tokenizer, mx.array(prompt), max_tokens=max_tokens, sampler=make_sampler(temp=temp),
        logits_processors=list(processors) or None, prompt_cache=cache, prefill_step_size=prefill_step_size)]


def _prompt(tokenizer) -> list[int]:
    from models.prompt_text import render_prompt
    return render_prompt(tokenizer, [{"role": m.role, "content": m.content} for m in CHAT], ())


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from mlx_lm import load
    model, config = load_model(tiny_model_dir)
    reference_model, reference_tokenizer = load(str(tiny_model_dir))
    return model, load_tokenizer(tiny_model_dir, eos_token_ids=config.get("eos_token_id")), reference_tokenizer


def test_greedy_output_is_mlx_lms_token_for_token(tiny):
    model, ours, theirs = tiny
    prompt = _prompt(ours)
    for max_tokens in (1, 7, 120):
        mine = _ours(model, ours, prompt, max_tokens=max_tokens)
        assert mine == _theirs(model, theirs, prompt, max_tokens=max_tokens)
        assert mine[-1][2] in ("stop", "length") and all(p[2] is None for p in mine[:-1])


def test_sampled_output_under_one_seed_is_mlx_lms(tiny):
    model, ours, theirs = tiny
    prompt = _prompt(ours)
    assert _ours(model, ours, prompt, temp=1.0, seed=3) == _theirs(model, theirs, prompt, temp=1.0, seed=3)


def test_a_prompt_read_in_chunks_and_a_kept_cache_give_mlx_lms_output(tiny, monkeypatch):
    from mlx_lm.models.cache import make_prompt_cache
    model, ours, theirs = tiny
    prompt = _prompt(ours)
    monkeypatch.setattr(generation, "PREFILL_STEP", 8)
    mine_cache, their_cache = make_prompt_cache(model), make_prompt_cache(model)
    assert _ours(model, ours, prompt, cache=mine_cache) == _theirs(model, theirs, prompt, cache=their_cache,
                                                                   prefill_step_size=8)
    assert mine_cache[0].offset == their_cache[0].offset
    follow_up = [5, 6, 7]  # the next turn reads only its new tokens into each cache
    assert _ours(model, ours, follow_up, cache=mine_cache) == _theirs(model, theirs, follow_up, cache=their_cache)


def test_a_grammar_processor_sees_the_tokens_mlx_lm_shows_it(tiny):
    model, ours, theirs = tiny
    seen: dict[str, list] = {"ours": [], "theirs": []}

    def recorder(name):
        def processor(tokens, logits):
            seen[name].append(tokens.tolist())
            return mx.where(mx.arange(logits.shape[-1]) % 3 == 0, logits, -mx.inf)  # a mask that changes the output
        return processor

    prompt = _prompt(ours)
    assert _ours(model, ours, prompt, processors=[recorder("ours")], max_tokens=12) == \
        _theirs(model, theirs, prompt, processors=[recorder("theirs")], max_tokens=12)
    assert seen["ours"] == seen["theirs"] and seen["ours"][0] == prompt


def test_the_real_models_greedy_reply_is_mlx_lms(real_model_dir):
    from mlx_lm import load
    model, config = load_model(real_model_dir)
    ours = load_tokenizer(real_model_dir, eos_token_ids=config.get("eos_token_id"))
    _, theirs = load(str(real_model_dir))
    prompt = _prompt(ours)
    mine = _ours(model, ours, prompt, max_tokens=48)
    assert mine == _theirs(model, theirs, prompt, max_tokens=48)
    assert "".join(p[1] for p in mine).strip()  # it did say something
