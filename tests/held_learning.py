"""A scripted structured model whose learning steps wait for the test: learning caught while it runs."""
from __future__ import annotations

import threading

from core.errors import GenerationStopped
from tests.fakes import ScriptedStructuredModel

HELD_S = 120  # the longest a scripted step waits for the test to release it


class HeldLearning:
    """A structured model whose extraction and reconcile steps each wait for the test to release them."""

    def __init__(self, facts: list[dict]) -> None:
        self.extract_go, self.reconcile_go = threading.Event(), threading.Event()
        self.extracting = threading.Event()
        self.script = ScriptedStructuredModel({"engram_facts": self._extract, "usefulness_rating": [{"useful": []}],
                                               "reconcile_decision": self._reconcile})
        self.model = self
        self.facts = facts

    def generate_json(self, messages, schema, *, max_tokens=512, stop=None):
        """As the real generator: `stop` is asked before the first token and again between tokens (here: once
        more after the held step, as if it were the next token)."""
        answer = self.script.generate_json(messages, schema, max_tokens=max_tokens, stop=stop)
        if stop is not None and stop():
            raise GenerationStopped("stopped between tokens")
        return answer

    def _extract(self, _messages, _schema):
        self.extracting.set()
        assert self.extract_go.wait(HELD_S)
        return {"facts": self.facts}

    def _reconcile(self, _messages, _schema):
        assert self.reconcile_go.wait(HELD_S)
        return {"decision": "new", "target": 0, "reason": "different"}
