"""Switching the embedding model from the window: every memory and turn is embedded again with the new model before
it is used, so recall never meets a store bound to another model (core.store.vectors.reembed)."""
from __future__ import annotations

import threading
from typing import Any

from core.store.db import open_db


def reembed_store(services: Any, name: str, stop: threading.Event | None = None) -> int:
    """Embed every memory and turn with the embedding model `name`, then make it the one in use; the rows done.

    It runs on a connection of its own: minutes of embedding hold neither the window's store lane nor, until the
    short swap at the end, the file's write lock. A failure leaves the store and the model in use as they were;
    so does `stop` set (the window closing), within one batch, instead of holding the quit for minutes."""
    from core.memory.manage import MemoryManager
    embedder = services.load_embedder(name, lasting=True)  # the whole store, then the process's embedder from here on
    db = open_db(services.db_path)
    try:
        done = MemoryManager(db, embedder).reembed(stop=None if stop is None else stop.is_set)
    finally:
        db.close()
    services.use_embedder(embedder)
    return done
