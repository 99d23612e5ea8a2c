"""KV caches of earlier prompts, so the fixed prefix of a structured prompt is read once, not every call.

Every extraction, rating or reconciliation prompt starts with the same long instructions (about 170 of 220
tokens for extraction) and differs only in its last part. A few slots each keep the KV cache of one earlier
prompt with a mirror of its token ids; a new prompt takes the slot sharing its longest prefix, the rest is
trimmed off, and only the new tail is read. The output is the same as without the cache. Slots are keyed (by
the active adapter): a cache filled under other weights is never reused. Used on the MLX thread only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence


@dataclass
class _Slot:
    cache: list
    tokens: list[int]
    key: Hashable


class PrefixCaches:
    def __init__(self, slots: int = 3, min_reuse: int = 8) -> None:
        self.capacity = slots
        self.min_reuse = min_reuse  # a shorter shared prefix (the template's first tokens) is not worth a slot
        self._slots: list[_Slot] = []  # least recently used first

    def take(self, model: Any, prompt: Sequence[int], key: Hashable) -> tuple[list, list[int]]:
        """(a cache holding a prefix of `prompt`, the tokens of `prompt` still to read); the slot leaves the pool
        until `give_back`, so a failed generation never leaves a half-filled cache behind."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache
        best, shared = None, 0
        for slot in self._slots:
            common = common_prefix(slot.tokens, prompt)
            if slot.key == key and common > shared and can_trim_prompt_cache(slot.cache):
                best, shared = slot, common
        shared = min(shared, len(prompt) - 1)  # the model must read at least one token to give logits
        if best is None or shared < self.min_reuse:
            return make_prompt_cache(model), list(prompt)
        self._slots.remove(best)
        trim_prompt_cache(best.cache, len(best.tokens) - shared)
        return best.cache, list(prompt[shared:])

    def give_back(self, cache: list, seen: Sequence[int], key: Hashable) -> None:
        """Keep `cache`, which has read `seen` (the prompt and the generated tokens, perhaps one fewer)."""
        from mlx_lm.models.cache import trim_prompt_cache
        offset = cache[0].offset if cache else 0
        if offset > len(seen):
            trim_prompt_cache(cache, offset - len(seen))
            offset = len(seen)
        self._slots.append(_Slot(cache, list(seen[:offset]), key))
        del self._slots[: max(0, len(self._slots) - self.capacity)]

    def clear(self) -> None:
        self._slots.clear()

    def __len__(self) -> int:
        return len(self._slots)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two prompts share (the part a cache can serve)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
