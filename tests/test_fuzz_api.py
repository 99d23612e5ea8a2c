"""Property-based fuzzing of the public memory API: whatever the input, a clear EngramError or success — never
another exception; a refused call leaves every row as it was; after the run the file passes integrity_check."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import EngramError
from core.memory.manage import MemoryManager
from core.memory.recall import recall
from core.store.db import open_db
from tests.fakes import HashEmbedder
from tests.fuzzkit import examples, fingerprint, ids, numbers, texts

FUZZ = settings(max_examples=examples(400), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

operations = st.one_of(
    st.tuples(st.just("add"), texts, st.fixed_dictionaries({}, optional={
        "created_at": numbers, "importance": numbers, "confidence": numbers, "valid_from": numbers,
        "subject": texts, "relation": texts, "object": texts, "kind": st.sampled_from(["semantic", "x", ""]),
        "pinned": st.booleans(), "protected": st.booleans()})),
    st.tuples(st.just("edit"), ids, st.fixed_dictionaries({}, optional={
        "statement": texts, "confidence": numbers, "importance": numbers, "valid_to": numbers, "subject": texts})),
    st.tuples(st.sampled_from(["pin", "unpin", "protect", "delete", "restore", "show"]), ids, st.just({})),
    st.tuples(st.just("purge"), st.lists(ids, max_size=3), st.just({})),
    st.tuples(st.just("search"), texts, st.fixed_dictionaries({"k": st.one_of(numbers, st.integers(-2, 20))})),
)


@pytest.fixture(scope="module", autouse=True)
def stores_from_one_made_store(tmp_path_factory):
    """Each example's new store (open_db on a path that does not exist) is a copy of one open_db made: the same
    schema and rows, opened in ~2 ms where making one takes ~10 (~8 s of the module's ~20)."""
    made, real_open_db = tmp_path_factory.mktemp("fuzz-api") / "engram.db", open_db
    real_open_db(made).close()

    def open_db_copying(path, **kwargs):
        if not Path(path).exists():
            shutil.copy2(made, path)  # its mode too: private, as open_db makes a new store
        return real_open_db(path, **kwargs)
    patch = pytest.MonkeyPatch()
    patch.setitem(globals(), "open_db", open_db_copying)
    yield
    patch.undo()


def _apply(manager: MemoryManager, op: tuple) -> None:
    name, target, extra = op
    if name == "add":
        manager.add(target, **extra)
    elif name == "edit":
        manager.edit(target, **extra)
    elif name == "purge":
        manager.purge(memory_ids=target)
    elif name == "search":
        recall(manager.db, manager.embedder, target, **extra)
    else:
        getattr(manager, name)(target)


@FUZZ
@given(st.lists(operations, min_size=1, max_size=6))
def test_any_sequence_of_api_calls_is_refused_cleanly_or_done(ops):
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "engram.db")
        try:
            manager = MemoryManager(db, HashEmbedder())
            manager.add("A first memory so ids 1 and 2 exist.")
            manager.delete(manager.add("A trashed one.").id)
            for op in ops:
                before = fingerprint(db)
                try:
                    _apply(manager, op)
                except EngramError:
                    assert fingerprint(db) == before, f"a refused {op[0]} changed the store"
            assert db.scalar("PRAGMA integrity_check") == "ok"
        finally:
            db.close()


json_values = st.recursive(st.none() | st.booleans() | numbers.filter(lambda v: not isinstance(v, str)) | texts,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=12)
memory_rows = st.fixed_dictionaries({"id": ids, "statement": texts | numbers},
                                    optional={"created_at": numbers, "protected": json_values,
                                              "deleted_at": numbers, "access_count": numbers,
                                              "source_episode_ids": json_values, "superseded_by": ids,
                                              "confidence": numbers, "kind": texts})
documents = st.one_of(
    json_values,
    st.fixed_dictionaries({"format": st.just("engram-export"), "version": st.sampled_from([1, 2, "1", None]),
                           "sessions": st.just([]), "episodes": st.lists(json_values, max_size=2),
                           "memories": st.lists(memory_rows, max_size=3), "history": st.just([]),
                           "edges": st.lists(json_values, max_size=2)}),
)


@FUZZ
@given(documents)
def test_any_import_document_is_refused_whole_or_imported(document):
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "engram.db")
        try:
            manager = MemoryManager(db, HashEmbedder())
            manager.add("Already here.")
            path = Path(folder) / "doc.json"
            path.write_text(json.dumps(document, allow_nan=True), encoding="utf-8", errors="surrogatepass")
            before = fingerprint(db)
            try:
                manager.import_from(path)
            except EngramError:
                assert fingerprint(db) == before
            assert db.scalar("PRAGMA integrity_check") == "ok"
        finally:
            db.close()
