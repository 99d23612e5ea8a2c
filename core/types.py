"""The domain's data: ids as NewType and frozen dataclasses that cross module boundaries."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NewType

MemoryId = NewType("MemoryId", int)
EpisodeId = NewType("EpisodeId", int)
SessionId = NewType("SessionId", int)
EntityId = NewType("EntityId", int)
HypothesisId = NewType("HypothesisId", int)
GoalId = NewType("GoalId", int)

MEMORY_KINDS = ("episodic", "semantic", "summary")
HISTORY_ACTIONS = ("create", "update", "invalidate", "pin", "unpin", "protect", "unprotect", "forget",
                   "delete", "restore", "purge", "permanent", "merge")


@dataclass(frozen=True)
class Memory:
    id: MemoryId
    statement: str
    subject: str = ""
    relation: str = ""
    object: str = ""
    kind: str = "semantic"
    critical: bool = False
    confidence: float = 0.7
    importance: float = 0.0
    pinned: bool = False
    protected: bool = False
    permanent: bool = False
    access_count: int = 0
    last_access: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    valid_from: float | None = None
    valid_to: float | None = None
    invalidated_at: float | None = None
    superseded_by: MemoryId | None = None
    forgotten_at: float | None = None
    deleted_at: float | None = None
    source_episode_ids: tuple[EpisodeId, ...] = ()

    @property
    def status(self) -> str:
        """active, invalidated, forgotten or trashed: what the memory browser shows."""
        if self.deleted_at is not None:
            return "trashed"
        if self.forgotten_at is not None:
            return "forgotten"
        if self.invalidated_at is not None:
            return "invalidated"
        return "active"

    @property
    def is_active(self) -> bool:
        return self.status == "active"

    @property
    def is_untouchable(self) -> bool:
        """Never forgotten or closed automatically (pinned, protected, permanent or critical)."""
        return self.pinned or self.protected or self.permanent or self.critical


@dataclass(frozen=True)
class Episode:
    id: EpisodeId
    user_text: str
    assistant_text: str = ""
    speaker: str = "user"
    session_id: SessionId | None = None
    created_at: float = 0.0
    access_count: int = 0
    last_access: float | None = None
    protected: bool = False
    rating: int | None = None
    summary_id: MemoryId | None = None
    forgotten_at: float | None = None
    deleted_at: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Session:
    id: SessionId
    title: str
    created_at: float
    updated_at: float
    ended_at: float | None = None
    reflected_at: float | None = None
    instructions: str = ""
    deleted_at: float | None = None


@dataclass(frozen=True)
class HistoryEntry:
    id: int
    memory_id: MemoryId
    action: str
    old_value: dict[str, Any] | None
    new_value: dict[str, Any] | None
    reason: str
    at: float


@dataclass(frozen=True)
class Edge:
    a_id: MemoryId
    b_id: MemoryId
    kind: str
    weight: float
    last_coactivated: float | None
    created_at: float


@dataclass(frozen=True)
class Hypothesis:
    id: HypothesisId
    dimension: str
    claim: str
    confidence: float
    status: str  # open / confirmed / rejected
    created_at: float
    updated_at: float
    decided_at: float | None = None
    evidence_episode_ids: tuple[EpisodeId, ...] = ()


@dataclass(frozen=True)
class LearningGoal:
    id: GoalId
    question: str
    status: str  # open / closed
    created_at: float
    reason: str = ""
    answer: str = ""
    memory_ids: tuple[MemoryId, ...] = ()
    last_considered: float | None = None
    closed_at: float | None = None
