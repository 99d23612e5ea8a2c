"""What the gate measures on a loaded model (with or without a LoRA adapter on it): the held-out probes' answer loss,
plain-text perplexity and the known facts' answer loss. Shared by the scoring run and the training run's early stop.
"""
from __future__ import annotations

import math
from typing import Any, cast

from models.prompt_cache import common_prefix
from models.prompt_text import control_markers, neutralise


def gate_scores(model: Any, tokenizer: Any, probes: list[dict], general: list[str], known: list[dict]) -> dict:
    """probe_loss (overall and by kind), general_ppl, known_fact_loss (None without known facts), and the mean
    log-probability margin of each preference probe's reply over its rejected form (None without any)."""
    scored = _probe_nlls(model, tokenizer, probes)
    by_kind = {kind: _mean([s for p, s in zip(probes, scored) if p.get("kind", "fact") == kind])
               for kind in sorted({p.get("kind", "fact") for p in probes})}
    contrasted = [p for p in probes if p.get("rejected")]
    margin = None
    if contrasted:
        kept = _probe_nlls(model, tokenizer, contrasted)
        rejected = _probe_nlls(model, tokenizer, [{**p, "answer": p["rejected"]} for p in contrasted])
        margin = sum(r[0] / max(r[1], 1) - k[0] / max(k[1], 1) for k, r in zip(kept, rejected)) / len(kept)
    return {"probe_loss": _mean(scored), "probe_loss_by_kind": by_kind,
            "general_ppl": _general_ppl(model, tokenizer, general),
            "known_fact_loss": _mean(_probe_nlls(model, tokenizer, known)) if known else None,
            "preference_margin": margin}


def _token_nll(model: Any, tokens: list[int], first_target: int, cache: Any = None) -> tuple[float, int]:
    """Summed negative log-likelihood of tokens[first_target:] given what precedes each (and what `cache` holds)."""
    import mlx.core as mx
    import mlx.nn as nn
    inputs = mx.array(tokens[:-1])[None]
    targets = mx.array(tokens[1:])[None]
    logits = model(inputs, cache=cache) if cache is not None else model(inputs)
    losses = nn.losses.cross_entropy(logits.astype(mx.float32), targets)[0, first_target - 1:]
    return cast(float, losses.sum().item()), int(losses.shape[0])  # a float32 array's item


def _probe_nlls(model: Any, tokenizer: Any, probes: list[dict]) -> list[tuple[float, int]]:
    """(summed NLL, token count) of each probe's answer given its question, in the model's chat template.

    Every probe starts with the same template header (a default system prompt, for some models half the
    tokens): it is read once into a KV cache, and each probe reads only its own tail (the same figures)."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache
    markers = control_markers(tokenizer)
    rows = []
    for probe in probes:
        question, answer = neutralise(probe["question"], markers), neutralise(probe["answer"], markers)
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                               add_generation_prompt=True)
        full = tokenizer.apply_chat_template([{"role": "user", "content": question},
                                              {"role": "assistant", "content": answer}])
        rows.append((list(full), len(prompt)))
    if not rows:
        return []
    # The shared head ends before any probe's first answer token, whose logits come from the token before it.
    shared = min(min(common_prefix(rows[0][0], full) for full, _ in rows), min(start for _, start in rows) - 1)
    cache = make_prompt_cache(model)
    if shared > 0:
        mx.eval(model(mx.array(rows[0][0][:shared])[None], cache=cache))
    out = []
    for full, start in rows:
        out.append(_token_nll(model, full[shared:], start - shared, cache=cache))
        trim_prompt_cache(cache, len(full) - 1 - shared)  # back to the shared head for the next probe
    return out


def _mean(scored: list[tuple[float, int]]) -> float:
    """Mean cross-entropy per answer token over the probes (each token counts once, as in training)."""
    return sum(nll for nll, _ in scored) / max(sum(n for _, n in scored), 1)


def _general_ppl(model: Any, tokenizer: Any, texts: list[str]) -> float:
    total, count = 0.0, 0
    markers = control_markers(tokenizer)
    for text in texts:
        nll, n = _token_nll(model, list(tokenizer.encode(neutralise(text, markers))), 1)
        total, count = total + nll, count + n
    return math.exp(total / max(count, 1))
