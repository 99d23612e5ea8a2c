"""Grammar-constrained decoding (llguidance over an mlx-lm model) that spends as few forward passes as it can.

Token by token, a JSON object of the engram schema cost one forward pass for every token, the ones the grammar
forces included: the keys (`"subject"`, `"relation"`, `"confidence"` …), the rest of an enum once its first token
is chosen, the closing brackets, and the end-of-text token after the final `}`. Here, after each sampled token the
grammar's forced continuation (llguidance's fast-forward tokens) is taken without sampling and read together with
the sampled token in one forward pass, as a prompt is read; once the grammar can only stop, no pass is made at
all. Greedy decoding also skips the mask when the model's own first choice is allowed (checking one token is
cheaper than masking 150k). And greedy decoding drafts (prompt lookup): where the last tokens occurred before, in
the prompt or the output, what followed them there is read in the same pass as a guess, and kept as far as the
model's own choices agree with it — an extraction copies the user's words, the prompt's relation names and its own
keys. On a CPU a pass costs about the same for one token or ten (Qwen2.5-0.5B here: 1.5 s of CPU for one token,
34 ms a token reading a prompt), so each kept guess is a pass saved; the output is token for token the greedy one.
Each token is still yielded one at a time, so a caller's `stop()` is asked between tokens as before.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from models.generation import check_ids_fit, read_prompt, wired_limit


@dataclass
class DecodeCounts:
    """What a constrained generation did: tokens sampled (a forward pass each), forced (read with the sampled one
    before them), and masks computed (the rest took the model's first choice unmasked)."""
    sampled: int = 0
    forced: int = 0
    drafted: int = 0  # drafted tokens the model confirmed (lookup_draft), read in the pass that checked them
    masks: int = 0
    passes: int = 0


class Grammar:
    """One llguidance matcher and the bitmask it fills; only the calls the decoding loop needs."""

    def __init__(self, matcher: Any, vocab_size: int) -> None:
        from llguidance.numpy import allocate_token_bitmask
        self.matcher = matcher
        self.vocab_size = vocab_size
        self.bitmask = allocate_token_bitmask(1, vocab_size)

    def allows(self, token: int) -> bool:
        return self.matcher.validate_tokens([token]) == 1

    def mask(self, width: int) -> Any:
        """An mx boolean row: the tokens the grammar allows next."""
        import mlx.core as mx
        from llguidance.numpy import fill_next_token_bitmask
        fill_next_token_bitmask(self.matcher, self.bitmask)
        allowed = np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")[:width]
        return mx.array(allowed.astype(np.bool_))

    def valid_prefix(self, tokens: list[int]) -> int:
        """How many of these tokens, one after another, the grammar allows now (nothing consumed)."""
        return int(self.matcher.validate_tokens(tokens)) if tokens else 0

    def consume(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))

    def forced(self) -> list[int]:
        """The tokens the grammar forces next (none once it can only stop); consumed."""
        if self.matcher.is_stopped():
            return []
        tokens = list(self.matcher.compute_ff_tokens())
        taken = self.matcher.try_consume_tokens(tokens) if tokens else 0
        return tokens[:taken]

    def stopped(self) -> bool:
        return bool(self.matcher.is_stopped())


def constrained_tokens(model: Any, prompt: Any, grammar: Grammar, *, cache: list, stream: Any, max_tokens: int,
                       eos: set[int], sampler: Callable | None = None, counts: DecodeCounts | None = None,
                       history: Sequence[int] = ()) -> Generator[int, None, None]:
    """Token ids after `prompt` (an mx.array of the ids the cache has not read yet) that the grammar allows, at most
    max_tokens; stops after an eos token (yielded) or once the grammar can only stop (no eos yielded then).
    `sampler` None is greedy, and then drafts from `history` (the whole prompt, its cached part too) and the output
    so far are checked in the same forward pass (see the module's docstring)."""
    import mlx.core as mx
    check_ids_fit(model, prompt)
    counts = counts if counts is not None else DecodeCounts()
    context = list(history) or prompt.tolist()
    drafting = sampler is None and _trimmable(cache)
    with wired_limit(model, stream), mx.stream(stream):
        pending = read_prompt(model, prompt, cache).tolist()
        made = 0
        while made < max_tokens:
            draft = lookup_draft(context, grammar, max_tokens - made - 1) if drafting else []
            logits = model(mx.array(pending + draft)[None], cache=cache)[0, len(pending) - 1:, :]
            counts.passes += 1
            accepted = _accept(logits, draft, grammar, eos)
            _trim(cache, len(draft) - len(accepted))
            for token in accepted:
                made += 1
                counts.drafted += 1
                context.append(token)
                yield token
            if accepted and (accepted[-1] in eos or grammar.stopped()):
                return
            token = _choose(logits[len(accepted)][None], grammar, sampler, counts)
            made += 1
            counts.sampled += 1
            context.append(token)
            yield token
            if token in eos or not grammar.consume(token) or grammar.stopped():
                return
            forced = grammar.forced()[: max_tokens - made]
            for extra in forced:
                made += 1
                counts.forced += 1
                context.append(extra)
                yield extra
            if grammar.stopped():
                return
            pending = [token, *forced]


DRAFT_NGRAMS = (3, 2)  # the last tokens looked up, longest first
DRAFT_TOKENS = 8  # at most this many drafted a pass: checking them costs a little compute, no more weight reads


def lookup_draft(context: Sequence[int], grammar: Grammar, room: int) -> list[int]:
    """What followed the latest earlier occurrence of the context's last few tokens (prompt lookup): an
    extraction copies the user's words, the prompt's relation names and its own keys again and again. Only the part
    the grammar allows is kept."""
    if room <= 0:
        return []
    for n in DRAFT_NGRAMS:
        if len(context) <= n:
            continue
        tail = list(context[-n:])
        for start in range(len(context) - n - 1, -1, -1):
            if list(context[start:start + n]) == tail:
                draft = list(context[start + n: start + n + min(DRAFT_TOKENS, room)])
                valid = grammar.valid_prefix(draft)
                if valid:
                    return draft[:valid]
                break
    return []


def _accept(logits: Any, draft: list[int], grammar: Grammar, eos: set[int]) -> list[int]:
    """The draft tokens the model would have chosen itself, greedily, one after another (each consumed): a draft
    token is the grammar's to allow (lookup_draft kept only those), so the model's unmasked first choice equal to it
    is the masked one too."""
    import mlx.core as mx
    if not draft:
        return []
    firsts = cast(list, mx.argmax(logits[: len(draft)], axis=-1).tolist())  # a 1-d array's list
    accepted: list[int] = []
    for wanted, chosen in zip(draft, firsts):
        if wanted != chosen or not grammar.consume(wanted):
            break
        accepted.append(wanted)
        if wanted in eos or grammar.stopped():
            break
    return accepted


def _trimmable(cache: list) -> bool:
    from mlx_lm.models.cache import can_trim_prompt_cache
    return bool(can_trim_prompt_cache(cache))


def _trim(cache: list, count: int) -> None:
    """Drop the last `count` positions the cache read (rejected draft tokens)."""
    if count > 0:
        from mlx_lm.models.cache import trim_prompt_cache
        trim_prompt_cache(cache, count)


def _choose(logits: Any, grammar: Grammar, sampler: Callable | None, counts: DecodeCounts) -> int:
    """The next token: greedy takes the model's first choice when the grammar allows it (no mask needed), else the
    best allowed one; a sampler draws from the allowed ones."""
    import mlx.core as mx
    if sampler is None:
        first = cast(int, mx.argmax(logits, axis=-1).item())  # an argmax is an integer
        if grammar.allows(first):
            return first
    counts.masks += 1
    masked = mx.where(grammar.mask(logits.shape[-1]), logits, -mx.inf)
    if sampler is None:
        return cast(int, mx.argmax(masked, axis=-1).item())
    logprobs = masked - mx.logsumexp(masked, keepdims=True)
    return int(sampler(logprobs).item())
