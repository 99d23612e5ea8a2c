"""The turn makes the message's embedding on its own thread while recall's full-text search reads the store
(core.assistant._embedding_soon, core.memory.recall's `embedding`): the same context, sooner."""
from __future__ import annotations

import threading

import numpy as np

from core.assistant import Assistant
from core.memory import recall_sources
from core.memory.index import index_memories
from core.memory.recall import recall
from core.store.memories import add_memory
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel


class WaitsForTheSearch:
    """The real embedder, but a single query's embedding finishes only once full-text search has begun: were the
    two in sequence, the turn would wait its 30 s and the test would see it."""

    def __init__(self, real, searched: threading.Event, order: list[str]) -> None:
        self.real, self.searched, self.order = real, searched, order
        self.name, self.dimension = real.name, real.dimension

    def embed(self, texts):
        if len(texts) == 1:
            self.order.append("embedding" if self.searched.wait(30) else "embedding, alone")
        return self.real.embed(texts)


def _store(db, embedder):
    ids = [add_memory(db, text) for text in ("My sister Ana lives in Lisbon.", "I am allergic to penicillin.",
                                              "My dog is called Biscuit.")]
    index_memories(db, embedder, ids)


def test_the_full_text_search_runs_while_the_message_is_embedded(db, embedder, monkeypatch):
    _store(db, embedder)
    searched, order = threading.Event(), []
    real_search = recall_sources.bm25_candidates

    def search(*args, **kwargs):
        order.append("search")
        searched.set()
        return real_search(*args, **kwargs)

    monkeypatch.setattr(recall_sources, "bm25_candidates", search)
    assistant = Assistant(db, WaitsForTheSearch(embedder, searched, order), ScriptedChatModel(["ok"]), None)
    prepared = assistant.prepare(create_session(db, "s"), "Where does my sister live?")
    # the embedding ended only once full-text search had begun (memories' and turns': both ran)
    assert order[0] == "search" and order.count("search") == 2 and order.count("embedding") == 1
    assert any("Lisbon" in m.text for m in prepared.used)


def test_recall_with_a_vector_made_elsewhere_finds_what_it_finds_alone(db, embedder):
    _store(db, embedder)
    query = "What is my dog's name?"
    made = np.array(embedder.embed([query])[0])
    alone = recall(db, embedder, query, k=3)
    given = recall(db, embedder, query, k=3, embedding=lambda: made)
    assert [(h.kind, h.id, h.score) for h in given.hits] == [(h.kind, h.id, h.score) for h in alone.hits]
    assert given.hits and "Biscuit" in given.hits[0].text


def test_an_embedding_that_fails_fails_the_turn_with_its_own_error(db, embedder):
    _store(db, embedder)

    class Broken:
        name, dimension = embedder.name, embedder.dimension

        def embed(self, texts):
            raise RuntimeError("the embedding model went away")

    assistant = Assistant(db, Broken(), ScriptedChatModel(["ok"]), None)
    try:
        assistant.prepare(None, "Where does my sister live?")
    except RuntimeError as exc:
        assert "went away" in str(exc)
    else:
        raise AssertionError("prepare went on without the message's embedding")
