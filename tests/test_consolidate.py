"""Consolidation: clusters of related episodes become summaries that keep their facts; similarity edges."""
from __future__ import annotations

import numpy as np

from core.config import Settings
from core.jobs import stepwise
from core.memory import consolidate
from core.memory.index import index_episodes, index_memories
from core.store import edges
from core.store.episodes import add_episode, get_episode
from core.store.memories import add_memory, get_memory
from tests.fakes import ScriptedStructuredModel

SETTINGS = Settings()
GARDEN = ["My tomatoes are finally ripening in the garden", "The garden tomatoes need more water this week",
          "I planted basil next to the tomatoes in my garden"]
TAXES = ["I need to file my income tax return before April", "My income tax return is almost done"]


def store_with_topics(db, clock, embedder):
    ids = [add_episode(db, text, "Noted.") for text in GARDEN + TAXES + ["What is the capital of Peru?"]]
    basil = add_memory(db, "The user grows basil.", source_episode_ids=[ids[2]])
    index_episodes(db, embedder, ids)
    index_memories(db, embedder, [basil])
    clock.advance(seconds=2 * 3600)
    return ids, basil


def test_leader_clustering_groups_close_vectors():
    vectors = np.array([[1, 0], [0.99, 0.1], [0, 1], [0.05, 1]], dtype=np.float32)
    assert consolidate.cluster(vectors, 0.9) == [[0, 1], [2, 3]]


def test_related_episodes_become_summaries_that_keep_their_facts(db, clock, embedder):
    ids, basil = store_with_topics(db, clock, embedder)
    model = ScriptedStructuredModel({"cluster_summary": [{"summary": "The user grows tomatoes in the garden."}]})
    report = consolidate.consolidation_pass(db, SETTINGS, embedder, model)
    assert report.summaries == 2 and report.episodes_linked == 5
    garden = {get_episode(db, i).summary_id for i in ids[:3]}
    taxes = {get_episode(db, i).summary_id for i in ids[3:5]}
    assert len(garden) == len(taxes) == 1 and garden != taxes and None not in garden
    assert get_episode(db, ids[5]).summary_id is None  # a lone question is not a cluster
    summary = get_memory(db, garden.pop())
    assert summary.kind == "summary" and summary.statement.startswith("The user grows tomatoes in the garden.")
    assert "The user grows basil." in summary.statement and set(summary.source_episode_ids) == set(ids[:3])
    assert edges.get_edge(db, summary.id, basil, "summary") is not None
    assert model.titles() == ["cluster_summary", "cluster_summary"]
    again = consolidate.consolidation_pass(db, SETTINGS, embedder, model)
    assert again.summaries == 0  # already summarised episodes are not summarised twice


def test_a_summary_keeps_only_sentences_its_conversations_support(db, clock, embedder):
    ids, _ = store_with_topics(db, clock, embedder)
    said = ("The user grows tomatoes and basil in the garden. The user flies to Mars every week. "
            ":Paris becausemilygredoppy˛ cenȜ w蝻 if anmembe")
    model = ScriptedStructuredModel({"cluster_summary": [{"summary": said}]})
    report = consolidate.consolidation_pass(db, SETTINGS, embedder, model)
    garden = get_memory(db, get_episode(db, ids[0]).summary_id).statement
    taxes = get_memory(db, get_episode(db, ids[3]).summary_id).statement
    assert garden.startswith("The user grows tomatoes and basil in the garden.")
    assert "Mars" not in garden + taxes and "Paris" not in garden + taxes
    assert taxes.startswith("Summary of 2 conversation turns") and "tomatoes" not in taxes  # nothing of it held
    assert report.dropped == {"not in its conversations": 3, "not language": 2}


def test_without_a_model_the_summary_is_deterministic(db, clock, embedder):
    ids, _ = store_with_topics(db, clock, embedder)
    report = consolidate.consolidation_pass(db, SETTINGS, embedder, None)
    summary = get_memory(db, get_episode(db, ids[0]).summary_id)
    assert report.summaries == 2 and "tomatoes" in summary.statement and "The user grows basil." in summary.statement


def test_close_memories_get_similarity_edges_once(db, embedder):
    a = add_memory(db, "The user's favourite colour is blue.")
    b = add_memory(db, "The user's favorite color is blue.")
    c = add_memory(db, "The user commutes by train to Zurich.")
    index_memories(db, embedder, [a, b, c])
    report = consolidate.consolidation_pass(db, SETTINGS, embedder)
    edge = edges.get_edge(db, a, b, "similarity")
    assert report.similarity_edges == 1 and edge is not None and edge.weight >= 0.8
    assert edges.get_edge(db, a, c, "similarity") is None
    assert consolidate.consolidation_pass(db, SETTINGS, embedder).similarity_edges == 0  # cursor moved on
    assert get_memory(db, a).importance > get_memory(db, c).importance  # PageRank share via the new edge


class FakeContext:
    """The two calls stepwise makes on a JobContext, recorded."""

    def __init__(self, yield_after: int) -> None:
        self.resume, self.payload, self.checkpoints, self.polls = None, {}, [], 0
        self.yield_after = yield_after

    def should_yield(self) -> bool:
        self.polls += 1
        return self.polls > self.yield_after

    def checkpoint(self, state):
        self.checkpoints.append(dict(state))

    def progress(self, fraction, message=""):
        pass


def test_the_job_stops_between_batches_and_resumes(db, clock, embedder):
    ids, _ = store_with_topics(db, clock, embedder)
    settings = SETTINGS.replace(reflection=SETTINGS.reflection.__class__(batch_size=3))
    handler = stepwise(consolidate.Consolidator(db, settings, embedder).step)
    first = FakeContext(yield_after=1)
    assert handler(first) == "yielded" and len(first.checkpoints) == 1
    assert first.checkpoints[0]["phase"] == "episodes" and first.checkpoints[0]["cursor"] == ids[2]
    second = FakeContext(yield_after=100)
    second.resume = first.checkpoints[-1]
    assert handler(second) is None and second.checkpoints[-1]["phase"] == "done"
    assert get_episode(db, ids[0]).summary_id is not None


def test_a_summary_that_gives_way_to_the_user_leaves_its_batch_unwritten_and_is_written_later(db, clock, embedder):
    ids, _ = store_with_topics(db, clock, embedder)
    model = ScriptedStructuredModel({"cluster_summary": [{"summary": "The user grows tomatoes in the garden."}]})
    stopped = stepwise(consolidate.Consolidator(db, SETTINGS, embedder, model, stop=lambda: True).step)
    context = FakeContext(yield_after=100)
    assert stopped(context) == "yielded" and context.checkpoints == []
    assert all(get_episode(db, i).summary_id is None for i in ids)  # not a poorer summary: none yet
    again = FakeContext(yield_after=100)
    assert stepwise(consolidate.Consolidator(db, SETTINGS, embedder, model).step)(again) is None
    assert get_memory(db, get_episode(db, ids[0]).summary_id).statement.startswith("The user grows tomatoes")
