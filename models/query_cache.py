"""A small LRU cache of single-query embeddings: a turn re-embeds the same message for recall and for learning."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class QueryCache:
    size: int = 512
    _vectors: OrderedDict = field(default_factory=OrderedDict, repr=False)

    def get(self, text: str, compute: Callable[[str], np.ndarray]) -> np.ndarray:
        """The cached vector for `text`, else `compute(text)` stored read-only (a caller cannot change the cache)."""
        hit = self._vectors.get(text)
        if hit is not None:
            self._vectors.move_to_end(text)
            return hit
        vector = compute(text)
        vector.setflags(write=False)
        self._vectors[text] = vector
        if len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
        return vector

    def pop(self, text: str, default: np.ndarray | None = None) -> np.ndarray | None:
        """Drop `text` (as dict.pop): the next embed of it computes afresh, as for a new message."""
        return self._vectors.pop(text, default)
