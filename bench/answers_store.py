"""An ingested store for bench/answers.py: a conversation fed through the product's turn pipeline, cached by its inputs.

Every turn goes through Assistant.prepare (memory dial off: the reply is the conversation's own, not made from
memory), Assistant.finish with that reply, and Assistant.learn (embedded for recall, then learned from). The cache
key hashes what decides the store's contents: the conversation's text, the learn mode, the embedder, the learning
model's name and STORE_FORMAT (raise it when ingestion changes). Questions are asked on a private copy, so the
cached file never changes.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from core.errors import EngramError

STORE_FORMAT = 1


class MutableClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class PatternsOnly:
    """The learner of `--learn patterns`: no model call succeeds, so a turn's facts are only those the person plainly
    said (core.memory.said_facts), kept as the turn learner keeps them when a model fails."""
    name = "patterns only"

    def generate_json(self, messages: Any, schema: Any, **_: Any) -> dict:
        raise EngramError("no model learning in this run (--learn patterns)")


@dataclass
class StoreCache:
    folder: Path

    def path_for(self, key: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder / f"{key}.db"


@dataclass
class Store:
    """A cached store opened on a private copy; maps episodes to the data set's message ids."""
    path: Path
    episode_ids: dict[int, tuple[str, ...]]
    db: Any = None
    _copy: Path | None = field(default=None, repr=False)

    def open(self, clock: Callable[[], float]) -> Any:
        from core.store.db import open_db
        folder = Path(tempfile.mkdtemp(prefix="engram-answers-"))
        self._copy = folder / "engram.db"
        shutil.copyfile(self.path, self._copy)
        self.db = open_db(self._copy, clock=clock)
        original_close = self.db.close

        def close() -> None:
            original_close()
            shutil.rmtree(folder, ignore_errors=True)
        self.db.close = close
        return self.db

    def ids_of(self, episodes: Iterable[int]) -> set[str]:
        return {i for e in episodes for i in self.episode_ids.get(int(e), ())}

    def sources_of(self, memory_ids: Iterable[int]) -> list[int]:
        ids = [int(m) for m in memory_ids]
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return [int(r[0]) for r in self.db.execute(
            f"SELECT DISTINCT episode_id FROM memory_sources WHERE memory_id IN ({marks})", ids)]

    def quoted(self, evidence: Iterable[str]) -> list[tuple[int, str, float]]:
        """(episode id, text as recall quotes it, when it was said) of the turns holding these message ids, in
        conversation order."""
        from core.memory.recall_explain import turn_text
        from core.store import turns
        wanted = set(evidence)
        episodes = sorted(e for e, ids in self.episode_ids.items() if wanted & set(ids))
        unquoted = turns.unquoted_replies(self.db, episodes)
        marks = ",".join("?" * len(episodes))
        rows = {int(r[0]): (r[1], r[2], r[3], float(r[4])) for r in self.db.execute(
            f"SELECT id, speaker, user_text, assistant_text, created_at FROM episodes WHERE id IN ({marks})",
            episodes)}
        return [(e, turn_text(*unquoted[e]) if e in unquoted else turn_text(*rows[e][:3]), rows[e][3])
                for e in episodes if e in rows]


def cache_key(dialogue: Any, learn: str, embedder: Any, learner: Any) -> str:
    digest = hashlib.sha256()
    for part in (f"format {STORE_FORMAT}", dialogue.dataset, dialogue.name, dialogue.source_text, learn,
                 f"{embedder.name}/{embedder.dimension}", getattr(learner, "name", type(learner).__name__)):
        digest.update(str(part).encode("utf-8") + b"\0")
    return digest.hexdigest()[:20]


def ingested(dialogue: Any, embedder: Any, chat: Any, learner: Any, learn: str, settings: Any, cache: StoreCache,
             log: Callable[[str], None] = lambda _: None) -> Store:
    """The dialogue's store from the cache, or fed turn by turn now and cached."""
    learner = learner if learn == "model" and learner is not None else PatternsOnly()
    path = cache.path_for(f"{dialogue.dataset}-{dialogue.name}-{learn}-{cache_key(dialogue, learn, embedder, learner)}")
    mapping = path.with_suffix(".json")
    if path.is_file() and mapping.is_file():
        log(f"{dialogue.name}: reusing the ingested store {path.name}")
        return Store(path, {int(k): tuple(v) for k, v in json.loads(mapping.read_text()).items()})
    staging = Path(tempfile.mkdtemp(prefix=".ingesting-", dir=path.parent))
    try:
        episode_ids, report = _feed(dialogue, embedder, chat, learner, settings, staging / "engram.db")
        log(f"{dialogue.name}: ingested {len(dialogue.turns)} turns ({report})")
        os.replace(staging / "engram.db", path)
        mapping.write_text(json.dumps({str(k): list(v) for k, v in episode_ids.items()}), encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Store(path, episode_ids)


def _feed(dialogue: Any, embedder: Any, chat: Any, learner: Any, settings: Any,
          path: Path) -> tuple[dict[int, tuple[str, ...]], str]:
    from core.assistant import Assistant
    from core.errors import InvalidInput
    from core.store import vectors
    from core.store.db import open_db
    from core.store.sessions import create_session, end_session

    clock = MutableClock(dialogue.turns[0].at)
    db = open_db(path, clock=clock)
    episode_ids: dict[int, tuple[str, ...]] = {}
    facts = refused = 0
    try:
        assistant = Assistant(db, embedder, chat, learner, settings, clock)
        session, current = None, None
        for turn in dialogue.turns:
            clock.now = turn.at
            if turn.session != current:
                if session is not None:
                    end_session(db, session)
                session, current = create_session(db, f"session {turn.session}", created_at=turn.at), turn.session
            try:
                record = assistant.finish(assistant.prepare(session, turn.user, dial="off"), turn.reply)
            except InvalidInput:
                refused += 1  # the product refuses it (e.g. too long): it is not in the store, as in the app
                continue
            episode_ids[int(record.episode_id)] = turn.ids
            facts += len(assistant.learn(record).facts)
        vectors.upkeep(db)  # as an import ends: many turns written in a row (core.store.vector_packs)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return episode_ids, f"{facts} facts learned, {refused} turns refused"
