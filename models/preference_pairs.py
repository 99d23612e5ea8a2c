"""The preference-pair objective for the fine-tune worker: ORPO (Hong et al., 2024, arXiv 2403.07691) on mlx-lm's
LoRA trainer, which takes its loss and batch iterator as arguments.

ORPO needs no reference model (DPO does, and a LoRA run on a small machine would pay a second forward pass for it):

    loss = NLL(chosen) - BETA * log sigmoid(log odds(chosen) - log odds(rejected))
    log odds(y) = log p - log(1 - p),  p = exp(mean log-probability per token of y)

A batch holds the chosen replies in its first half and the rejected ones, same prompts, in its second. An example
the user gave no rejected reply for is a pair with itself: its odds-ratio term is the constant log sigmoid(0), so
it trains on the plain loss alone, in the same run.
"""
from __future__ import annotations

from typing import Any, Iterator

BETA = 0.1  # the paper's lambda for its chat runs


def pair_tokens(rows: list[dict], tokenizer: Any, neutral: Any) -> list[tuple[list[int], list[int], int]]:
    """(chosen tokens, rejected tokens, prompt length) per pair; `neutral` makes the user's text plain data."""
    out = []
    for row in rows:
        prompt = [{**m, "content": neutral(m["content"])} for m in row["messages"]]
        head = list(tokenizer.apply_chat_template(prompt, add_generation_prompt=True))
        whole = [list(tokenizer.apply_chat_template(prompt + [{"role": "assistant", "content": neutral(text)}]))
                 for text in (row["chosen"], row["rejected"])]
        out.append((whole[0], whole[1], len(head)))
    return out


def with_self_pairs(pairs: list[dict], examples: list[dict]) -> list[dict]:
    """The pairs, and every example not among them as a pair with itself (plain loss only)."""
    seen = {(_key(p["messages"]), p["chosen"]) for p in pairs}
    rest = [{"messages": e["messages"][:-1], "chosen": e["messages"][-1]["content"],
             "rejected": e["messages"][-1]["content"]} for e in examples
            if (_key(e["messages"][:-1]), e["messages"][-1]["content"]) not in seen]
    return pairs + rest


def _key(messages: list[dict]) -> str:
    return "\x00".join(f"{m['role']}:{m['content']}" for m in messages)


def pair_batches(pairs: list[tuple[list[int], list[int], int]], batch_size: int, max_seq_length: int,
                 seed: int) -> Iterator[tuple[Any, Any]]:
    """Endless shuffled batches: (tokens [2B, L], lengths [2B, 2] as (prompt length, length)), chosen first."""
    import mlx.core as mx
    import numpy as np
    rng = np.random.default_rng(seed)
    batch_size = min(batch_size, len(pairs))
    while True:
        order = rng.permutation(len(pairs))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chosen = [pairs[i] for i in order[start:start + batch_size]]
            rows = [c[0] for c in chosen] + [c[1] for c in chosen]
            heads = [c[2] for c in chosen] * 2
            lengths = [min(len(r), max_seq_length) for r in rows]
            tokens = np.zeros((len(rows), max(lengths)), np.int32)
            for n, row in enumerate(rows):
                tokens[n, :lengths[n]] = row[:lengths[n]]
            yield mx.array(tokens), mx.array(list(zip(heads, lengths)))


def orpo_loss(model: Any, batch: Any, lengths: Any) -> tuple[Any, Any]:
    import mlx.core as mx
    import mlx.nn as nn
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits = model(inputs).astype(mx.float32)
    steps = mx.arange(1, targets.shape[1] + 1)
    mask = mx.logical_and(steps >= lengths[:, 0:1], steps <= lengths[:, 1:]).astype(mx.float32)
    token_nll = nn.losses.cross_entropy(logits, targets) * mask
    half = batch.shape[0] // 2
    counts = mx.maximum(mask.sum(axis=1), 1.0)
    mean_logp = -token_nll.sum(axis=1) / counts  # per sequence
    log_odds = mean_logp - mx.log(mx.maximum(-mx.expm1(mean_logp), 1e-6))
    ratio = nn.log_sigmoid(log_odds[:half] - log_odds[half:])
    chosen_tokens = mask[:half].sum()
    nll = token_nll[:half].sum() / mx.maximum(chosen_tokens, 1.0)
    return nll - BETA * ratio.mean(), chosen_tokens
