"""Builds the store, the embedder and (later) the chat engine, assistant and scheduler from Settings.

Everything is created lazily on first use and handed down; nothing here is global.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from core.config import (DB_FILENAME, Settings, ensure_private_dir, load_settings, resolve_data_dir)
from core.store.db import Database, open_db, store_is_read_only

if TYPE_CHECKING:
    from core.memory.manage import MemoryManager


@dataclass
class Services:
    settings: Settings
    data_dir: Path
    _db: Database | None = field(default=None, repr=False)
    _embedder: Any = field(default=None, repr=False)
    chat: Any = field(default=None, repr=False)  # a loaded ChatModel handed in (tests, CLI); else loaded on demand
    _loaded_chat: Any = field(default=None, repr=False)  # the engine this object loaded, with its model ref
    _loaded_ref: str = field(default="", repr=False)
    _learning_db: Database | None = field(default=None, repr=False)
    _mlx_worker: Any = field(default=None, repr=False)  # the one thread that runs MLX (models/worker.py)
    # This process embeds for long (the window, `engram chat`, an import): worth an encoder slower to start and
    # faster a text (models/bert_embedder.default_backend); a one-shot verb starts the cheaper one.
    lasting: bool = False
    # Lanes ask for these at the same time (the GUI's first panel and the db lane): each is built once, under a lock.
    _locks: dict = field(default_factory=lambda: {name: threading.Lock() for name in ("db", "embedder", "chat", "mlx")},
                         repr=False)

    @classmethod
    def from_data_dir(cls, data_dir: Path | str | None = None, env: Mapping[str, str] | None = None, *,
                      lasting: bool = False) -> "Services":
        env = os.environ if env is None else env
        folder = Path(data_dir).expanduser() if data_dir else resolve_data_dir(Settings(), env)
        settings = load_settings(folder)
        return cls(settings=settings, data_dir=folder, lasting=lasting)

    @classmethod
    def from_args(cls, args: Any) -> "Services":
        return cls.from_data_dir(getattr(args, "data_dir", None), lasting=bool(getattr(args, "lasting", False)))

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME

    @property
    def db(self) -> Database:
        with self._locks["db"]:
            if self._db is None:
                ensure_private_dir(self.data_dir)
                self._db = open_db(self.db_path)
        return self._db

    @property
    def mlx_worker(self) -> Any:
        """The process's one MLX thread: the chat engine and an mlx.nn embedder both run on it, since MLX must not
        be used from two threads at once (models/worker.py). Made on first use; no MLX is imported for it."""
        with self._locks["mlx"]:
            if self._mlx_worker is None:
                from models.worker import MLXWorker
                self._mlx_worker = MLXWorker()
        return self._mlx_worker

    def load_embedder(self, name: str, *, lasting: bool | None = None) -> Any:
        """An embedding model by name for this process, on its MLX thread when it runs on mlx.nn."""
        from models.embeddings import load_embedder  # deferred: the weights; another ST model pulls torch
        lasting = self.lasting if lasting is None else lasting
        return load_embedder(name, lasting=lasting, mlx_worker=self.mlx_worker)

    @property
    def reading_db(self) -> Database:
        """For commands that only read (list, show, export): a store the user made read-only is opened read-only
        rather than refused (reading needs no write); any other store is `db`."""
        with self._locks["db"]:
            if self._db is None and store_is_read_only(self.db_path):
                self._db = open_db(self.db_path, read_only=True)
        return self.db

    @property
    def embedder(self) -> Any:
        return self._embedder_loaded()

    def _embedder_loaded(self, lasting: bool | None = None) -> Any:
        with self._locks["embedder"]:
            if self._embedder is None:
                self._embedder = self.load_embedder(self.settings.embedder, lasting=lasting)
        return self._embedder

    def embedder_on_use(self, *, lasting: bool | None = None) -> Any:
        """`embedder`, loaded when something is first asked of it: `memory add` of a statement already remembered
        and an import that brings nothing new never load the model (0.15 s, 0.4 for onnx). `lasting` as in
        load_embedder, for this load (the process's own choice when None)."""
        return EmbedderOnUse(lambda: self._embedder_loaded(lasting))

    def use_embedder(self, embedder: Any) -> None:
        """From now on, embed with this one (the store was re-embedded with it: app.services.reembed)."""
        with self._locks["embedder"]:
            self._embedder = embedder

    @property
    def embedder_loaded(self) -> bool:
        return self._embedder is not None

    def chat_loaded(self) -> bool:
        """Whether chat_engine() answers without loading: a model handed in, or the chosen one already loaded."""
        return self.chat is not None or (self._loaded_chat is not None and self._loaded_ref == self.settings.chat_model)

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def model_store(self) -> Any:
        from models.download import ModelStore  # deferred: huggingface_hub is slow to import
        return ModelStore(self.models_dir)

    def chat_model_folder(self) -> Path:
        """The chosen chat model's folder; ModelError saying what to do when it is not installed."""
        return self.model_store().resolve(self.settings.chat_model)

    def chat_engine(self, *, adapter_db: Database | None = None) -> Any:
        """The active chat model: the one handed in, else settings.chat_model loaded on first use.

        Loading takes seconds: call it from the model lane. Choosing another model in Settings reloads it. With
        `adapter_db` (a connection of the calling thread) the engine first takes up the store's active fine-tuned
        adapter, or drops one that was switched off: the idle-time fine-tune and the CLI change it at any time.
        """
        with self._locks["chat"]:
            engine = self.chat if self.chat is not None else self._chosen_engine()
            if engine is self._loaded_chat and hasattr(engine, "set_context_tokens"):
                engine.set_context_tokens(self.generation().context_tokens)  # the Models panel may have changed it
            if adapter_db is not None and hasattr(engine, "load_adapter"):
                use_active_adapter(engine, adapter_db)
            return engine

    def _chosen_engine(self) -> Any:
        ref = self.settings.chat_model
        if self._loaded_chat is None or self._loaded_ref != ref:
            from models.chat import ChatEngine  # deferred: MLX is slow to import
            folder = self.chat_model_folder()  # ModelError saying what to do when nothing is installed
            self._unload_chat()
            self._loaded_chat = ChatEngine.load(folder, worker=self.mlx_worker,
                                                context_tokens=self.generation().context_tokens)
            self._loaded_ref = ref
        return self._loaded_chat

    def generation(self) -> Any:
        """Settings.generation with the chosen model's own sampling (core.model_sampling: its generation config,
        then what the user set for it in Models). A model handed in without a chosen one keeps Settings'."""
        from core.model_sampling import model_sampling
        ref = self.settings.chat_model
        if not ref:
            return self.settings.generation
        try:
            folder = self.model_store().resolve(ref)
        except Exception:  # noqa: BLE001 - not installed: the load says so; the sampling is Settings' meanwhile
            folder = None
        return model_sampling(self.data_dir, ref, folder, self.settings.generation).applied_to(
            self.settings.generation)

    def structured_model(self) -> Any:
        """JSON-Schema-constrained generation over the chat engine (shares its MLX thread); None without one."""
        engine = self.chat_engine()
        if not hasattr(engine, "run"):
            return None  # a scripted or remote chat model has no tokenizer to constrain
        from models.structured import StructuredGenerator
        return StructuredGenerator(engine)

    @property
    def learning_db(self) -> Database:
        """A second connection for store work on the model lane (learning after a turn): SQLite wants one
        connection per thread, and WAL lets it write while the db lane reads."""
        _ = self.db  # the main connection first: it creates the folder and applies migrations
        with self._locks["db"]:
            if self._learning_db is None:
                self._learning_db = open_db(self.db_path)
        return self._learning_db

    def assistant(self, *, db: Database | None = None, structured: Any = None) -> Any:
        """The turn pipeline over `db` (default: the main connection), the embedder and the chat model."""
        from core.assistant import Assistant
        settings = self.settings.replace(generation=self.generation())  # this model's temperature, top-p, lengths
        return Assistant(db or self.db, self.embedder, self.chat_engine(), structured, settings,
                         (db or self.db).clock)

    def scheduler(self, **options: Any) -> Any:
        """The idle-time scheduler with the real reflection, consolidation, forgetting and fine-tune handlers."""
        from app.services.scheduling import build_scheduler
        return build_scheduler(self, **options)

    def manager(self, *, with_embedder: bool = False) -> "MemoryManager":
        """The hand-edit facade; the embedder (slow to load) only when vectors must be written."""
        from core.memory.manage import MemoryManager
        return MemoryManager(self.db, self.embedder if with_embedder else None)

    def unload_chat(self) -> None:
        """Free the chat model this object loaded (a fine-tune needs its memory); the next chat_engine() loads it
        again. A model handed in is left alone."""
        with self._locks["chat"]:
            self._unload_chat()

    def _unload_chat(self) -> None:
        if self._loaded_chat is not None:
            self._loaded_chat.unload()
            self._loaded_chat, self._loaded_ref = None, ""

    def close(self) -> None:
        self._unload_chat()
        if self._learning_db is not None:
            self._learning_db.close()
        self._learning_db = None
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._mlx_worker is not None and self._embedder is None:
            self._mlx_worker.close()  # an mlx.nn embedder still in use keeps its thread


def use_active_adapter(engine: Any, db: Database) -> Any:
    """Put the store's active adapter on `engine` if it was trained on the engine's base model, else none.
    Returns the adapter version now in use (or None). One that is gone or will not load is skipped: chat goes on."""
    from core.errors import ModelError
    from core.finetune.adapters import active_adapter
    active = active_adapter(db)
    usable = active is not None and _same_folder(active.base_model, engine.path) and Path(active.path).is_dir()
    wanted = Path(active.path) if usable and active is not None else None
    if engine.adapter == wanted:
        return active if usable else None
    try:
        engine.load_adapter(wanted) if wanted is not None else engine.remove_adapter()
    except ModelError:
        engine.remove_adapter()
        return None
    return active if usable else None


def _same_folder(a: str | Path, b: str | Path) -> bool:
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


class EmbedderOnUse:
    """Stands for an embedder until one of its attributes is asked for (embed, name, dimension...), then loads it
    once and answers as it does."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load, self._loaded = load, None

    def __getattr__(self, name: str) -> Any:  # only for what this object lacks: everything an embedder has
        if self._loaded is None:
            self._loaded = self._load()
        return getattr(self._loaded, name)
