"""What the gate measures on a loaded model (with or without a LoRA adapter on it): the held-out probes' answer loss,
plain-text perplexity and the known facts' answer loss. Shared by the scoring run and the training run's early stop.
"""
from __future__ import annotations

import math
from typing import Any, cast

from models.prompt_text import control_markers, neutralise

BATCH = 8  # rows a forward pass reads: a large vocabulary's logits for 8 short rows stay a few hundred MB


def gate_scores(model: Any, tokenizer: Any, probes: list[dict], general: list[str], known: list[dict]) -> dict:
    """probe_loss (overall and by kind), general_ppl, known_fact_loss (None without known facts), and the mean
    log-probability margin of each preference probe's reply over its rejected form (None without any)."""
    scored = _probe_nlls(model, tokenizer, probes)
    by_kind = {kind: _mean([s for p, s in zip(probes, scored) if p.get("kind", "fact") == kind])
               for kind in sorted({p.get("kind", "fact") for p in probes})}
    kept = [s for p, s in zip(probes, scored) if p.get("rejected")]  # the preferred replies: scored just above
    contrasted = [p for p in probes if p.get("rejected")]
    margin = None
    if contrasted:
        rejected = _probe_nlls(model, tokenizer, [{**p, "answer": p["rejected"]} for p in contrasted])
        margin = sum(r[0] / max(r[1], 1) - k[0] / max(k[1], 1) for k, r in zip(kept, rejected)) / len(kept)
    return {"probe_loss": _mean(scored), "probe_loss_by_kind": by_kind,
            "general_ppl": _general_ppl(model, tokenizer, general),
            "known_fact_loss": _mean(_probe_nlls(model, tokenizer, known)) if known else None,
            "preference_margin": margin}


def _token_nll(model: Any, tokens: list[int], first_target: int) -> tuple[float, int]:
    """Summed negative log-likelihood of tokens[first_target:] given what precedes each: one row read alone."""
    import mlx.core as mx
    import mlx.nn as nn
    logits = model(mx.array(tokens[:-1])[None])
    losses = nn.losses.cross_entropy(logits.astype(mx.float32), mx.array(tokens[1:])[None])[0, first_target - 1:]
    return cast(float, losses.sum().item()), int(losses.shape[0])  # a float32 array's item


def _probe_nlls(model: Any, tokenizer: Any, probes: list[dict]) -> list[tuple[float, int]]:
    """(summed NLL, token count) of each probe's answer given its question, in the model's chat template."""
    markers = control_markers(tokenizer)
    rows = []
    for probe in probes:
        question, answer = neutralise(probe["question"], markers), neutralise(probe["answer"], markers)
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                               add_generation_prompt=True)
        full = tokenizer.apply_chat_template([{"role": "user", "content": question},
                                              {"role": "assistant", "content": answer}])
        rows.append((list(full), len(prompt)))
    return _batched_nlls(model, rows)


def _batched_nlls(model: Any, rows: list[tuple[list[int], int]]) -> list[tuple[float, int]]:
    """(summed NLL of tokens[first:], count) per (tokens, first) row, BATCH rows to a forward pass.

    Rows are padded on the right: under the causal mask a real token never sees the padding after it, so each
    row's figures are those of reading it alone, and one pass over many short rows costs far less than a pass
    each (on a busy CPU, a 135M model's gate scoring went from minutes to well under one)."""
    import mlx.core as mx
    import mlx.nn as nn
    out = []
    for begin in range(0, len(rows), BATCH):
        part = rows[begin:begin + BATCH]
        width = max(len(tokens) for tokens, _ in part)
        padded = mx.array([tokens + [0] * (width - len(tokens)) for tokens, _ in part])
        losses = nn.losses.cross_entropy(model(padded[:, :-1]).astype(mx.float32), padded[:, 1:])
        for n, (tokens, first) in enumerate(part):
            row = losses[n, first - 1:len(tokens) - 1]
            out.append((cast(float, row.sum().item()), int(row.shape[0])))  # a float32 array's item
    return out


def _mean(scored: list[tuple[float, int]]) -> float:
    """Mean cross-entropy per answer token over the probes (each token counts once, as in training)."""
    return sum(nll for nll, _ in scored) / max(sum(n for _, n in scored), 1)


def _general_ppl(model: Any, tokenizer: Any, texts: list[str]) -> float:
    markers = control_markers(tokenizer)
    scored = _batched_nlls(model, [(list(tokenizer.encode(neutralise(text, markers))), 1) for text in texts])
    return math.exp(sum(nll for nll, _ in scored) / max(sum(n for _, n in scored), 1))
