"""The ORPO objective (models/preference_pairs.py) in MLX: a pair with itself trains on the plain loss alone; a
chosen reply the model already prefers costs less than one it does not; batches put the chosen replies first."""
from __future__ import annotations

import math

import pytest

mx = pytest.importorskip("mlx.core")

from models.preference_pairs import BETA, orpo_loss, pair_batches, with_self_pairs  # noqa: E402

VOCAB = 5


def model_preferring(token: int):
    def model(inputs):
        logits = mx.zeros((*inputs.shape, VOCAB))
        return logits + mx.array([3.0 if t == token else 0.0 for t in range(VOCAB)])
    return model


def test_a_pair_with_itself_is_the_plain_loss_and_a_preferred_chosen_reply_costs_less():
    rows = mx.array([[1, 2, 4, 4], [1, 2, 3, 3]])  # chosen ends in 4s, rejected in 3s; the prompt is 2 tokens
    lengths = mx.array([[2, 4], [2, 4]])
    likes_four = model_preferring(4)
    same = mx.array([[1, 2, 4, 4], [1, 2, 4, 4]])
    loss, tokens = orpo_loss(likes_four, same, lengths)
    nll = -math.log(math.exp(3) / (math.exp(3) + VOCAB - 1))
    assert float(loss) == pytest.approx(nll + BETA * math.log(2), rel=1e-4) and int(tokens) == 2
    preferred, _ = orpo_loss(likes_four, rows, lengths)
    dispreferred, _ = orpo_loss(model_preferring(3), rows, lengths)
    assert float(preferred) < float(dispreferred)


def test_batches_hold_chosen_then_rejected_and_examples_without_a_pair_pair_with_themselves():
    pairs = [([1, 2, 3], [1, 2, 4, 4], 2), ([5, 6, 7], [5, 6, 8], 2)]
    tokens, lengths = next(pair_batches(pairs, 2, 512, seed=0))
    assert tokens.shape[0] == 4 and lengths[:, 0].tolist() == [2, 2, 2, 2]
    chosen = {tuple(tokens[i, :int(lengths[i, 1])].tolist()) for i in range(2)}
    assert chosen == {(1, 2, 3), (5, 6, 7)}
    example = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    paired = {"messages": [{"role": "user", "content": "q"}], "chosen": "a", "rejected": "b"}
    both = with_self_pairs([paired], [example, {"messages": paired["messages"] + [
        {"role": "assistant", "content": "a"}]}])
    assert both == [paired, {"messages": example["messages"][:1], "chosen": "hello", "rejected": "hello"}]
