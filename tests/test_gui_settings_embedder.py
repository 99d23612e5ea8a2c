"""Switching the embedding model in Settings: every memory and turn is embedded again with it first, then it is the
one in use — recall never meets a store bound to another model; saying no keeps the old one."""
from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pytestqt")

from core.config import load_settings  # noqa: E402
from core.memory.manage import MemoryManager  # noqa: E402
from core.memory.recall import recall  # noqa: E402
from core.store import vectors  # noqa: E402
from core.store.db import open_db  # noqa: E402


@pytest.fixture
def other_embedder(tmp_path):
    """A second embedding model on disk: MiniLM's weights in a folder of their own (a model named by its path)."""
    from models.embeddings import bundled_minilm_folder
    folder = tmp_path / "my-embedder"
    shutil.copytree(bundled_minilm_folder(), folder)
    return str(folder)


@pytest.fixture
def remembered(window, embedder):
    window.services.use_embedder(embedder)  # the session's MiniLM, as the window would load it
    db = open_db(window.services.db_path)
    MemoryManager(db, embedder).add("My sister Ana plays the violin in Lisbon.")
    db.close()
    return window


def _save(qtbot, panel, timeout=120_000):
    with qtbot.waitSignal(panel.saved, timeout=timeout) as saved:
        panel.save()
    return saved.args


def test_a_new_embedding_model_is_used_once_the_store_is_embedded_with_it(qtbot, remembered, other_embedder):
    window = remembered
    panel = window.show_panel("settings")
    asked = []
    panel.confirm = lambda question: asked.append(question) or True
    panel.embedder.setText(other_embedder)
    assert _save(qtbot, panel) == [True]
    assert "embeds every memory and conversation turn again" in asked[0]
    assert panel.saved_label.text() == f"Saved. 1 memory or turn embedded with {other_embedder}; it is the one in use."
    assert load_settings(window.services.data_dir).embedder == other_embedder
    assert window.services.embedder.name == other_embedder
    db = open_db(window.services.db_path)
    try:
        assert vectors.bound_embedder(db) == (other_embedder, 384)
        hits = recall(db, window.services.embedder, "Who plays the violin?").hits  # no EmbedderMismatch
        assert hits and "violin" in hits[0].text
    finally:
        db.close()


def test_saying_no_keeps_the_old_embedding_model_and_saves_the_rest(qtbot, remembered, other_embedder):
    window = remembered
    panel = window.show_panel("settings")
    before = window.services.settings.embedder
    panel.confirm = lambda question: False
    panel.embedder.setText(other_embedder)
    panel.dial.setCurrentText("eager")
    assert _save(qtbot, panel) == [True]
    assert panel.saved_label.text() == f"Saved. The embedding model stays {before}."
    saved = load_settings(window.services.data_dir)
    assert saved.embedder == before and saved.memory_dial == "eager"
    assert panel.embedder.text() == before  # the field shows what is in force
    db = open_db(window.services.db_path)
    try:
        assert vectors.bound_embedder(db)[0] == before
    finally:
        db.close()


def test_closing_the_window_stops_a_re_embedding_and_keeps_the_old_model(qtbot, remembered, other_embedder):
    window = remembered
    panel = window.show_panel("settings")
    before = window.services.settings.embedder
    panel.confirm = lambda question: "quitting stops it" in question
    panel.embedder.setText(other_embedder)
    panel.shutdown()  # as the window closing does, before the lanes are joined: the work sees it at its next batch
    assert _save(qtbot, panel) == [False]
    assert panel.saved_label.text().startswith("Not saved: re-embedding stopped")
    assert load_settings(window.services.data_dir).embedder == before and window.services.embedder.name == before
    db = open_db(window.services.db_path)
    try:
        assert vectors.bound_embedder(db)[0] == before
    finally:
        db.close()
