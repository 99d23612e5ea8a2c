"""Builds the store, the embedder and (later) the chat engine, assistant and scheduler from Settings.

Everything is created lazily on first use and handed down; nothing here is global.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from core.config import (DB_FILENAME, Settings, ensure_private_dir, load_settings, resolve_data_dir)
from core.store.db import Database, open_db

if TYPE_CHECKING:
    from core.memory.manage import MemoryManager


@dataclass
class Services:
    settings: Settings
    data_dir: Path
    _db: Database | None = field(default=None, repr=False)
    _embedder: Any = field(default=None, repr=False)

    @classmethod
    def from_data_dir(cls, data_dir: Path | str | None = None, env: Mapping[str, str] | None = None) -> "Services":
        env = os.environ if env is None else env
        folder = Path(data_dir).expanduser() if data_dir else resolve_data_dir(Settings(), env)
        settings = load_settings(folder)
        return cls(settings=settings, data_dir=folder)

    @classmethod
    def from_args(cls, args: Any) -> "Services":
        return cls.from_data_dir(getattr(args, "data_dir", None))

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME

    @property
    def db(self) -> Database:
        if self._db is None:
            ensure_private_dir(self.data_dir)
            self._db = open_db(self.db_path)
        return self._db

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from models.embeddings import load_embedder  # deferred: torch is slow to import
            self._embedder = load_embedder(self.settings.embedder)
        return self._embedder

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def model_store(self) -> Any:
        from models.download import ModelStore  # deferred: huggingface_hub is slow to import
        return ModelStore(self.models_dir)

    def manager(self, *, with_embedder: bool = False) -> "MemoryManager":
        """The hand-edit facade; the embedder (slow to load) only when vectors must be written."""
        from core.memory.manage import MemoryManager
        return MemoryManager(self.db, self.embedder if with_embedder else None)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
