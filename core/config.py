"""Settings: one frozen dataclass tree, read once at start and passed down.

Every tunable of the memory model lives here with its default and the seed it comes from
(see ../shared/seeds/README.md). `from_dict` is tolerant: unknown keys are ignored and a
value of the wrong type falls back to the default, so an old or hand-edited settings file
never stops Engram from starting.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

APP_NAME = "Engram"
DB_FILENAME = "engram.db"
SETTINGS_FILENAME = "settings.json"


@dataclass(frozen=True)
class RecallSettings:
    preset: str = "balanced"  # 004: the retrieval weights (type weights, recency cap) as a named scoring.PRESETS set
    k: int = 8  # MAGS: similar nodes recalled into a turn's context; 8 short facts fit a small model's window
    # Not a seed's: each retriever's pool before fusion and rescoring. 32, not 50: LoCoMo dev R@8 at the turn's k
    # 0.7993 vs 0.7981, recall's CPU at 100k real-text memories 36 vs 44 ms (2026-11-29, bench/notes.md).
    candidates: int = 32
    graph_hop_min_weight: float = 0.5  # only edges at least this strong are followed (MAGS)
    recency_half_life_days: float = 14.0  # short-term exponential decay (Exocortex)
    learn: bool = True  # recall's blend is learnt from vetoes, pins and thumbs (core.memory.recall_learning)


@dataclass(frozen=True)
class HebbianSettings:
    learning_rate: float = 0.2  # MAGS: co-use that proves useful strengthens an edge
    decay_per_day: float = 0.02  # MAGS: unused edges fade
    importance_decay_per_day: float = 0.01  # MAGS/001: importance fades too, half as fast as an unused edge
    permanence_threshold: float = 0.9  # MAGS: importance at which a memory becomes permanent
    pagerank_weight: float = 0.3  # 001: PageRank's share of importance
    min_edge_weight: float = 0.01  # MAGS: a Hebbian edge that fades below this is dropped
    similarity_edge_threshold: float = 0.8  # 001: cosine at which consolidation links two memories
    similarity_neighbours: int = 5  # 001: similarity edges kept per memory
    veto_factor: float = 0.5  # MAGS: a memory the user vetoes keeps this share of its edges to its reply-mates


@dataclass(frozen=True)
class ImportanceWeights:
    # KenLM (002): importance = w1·log(1+access) + w2·protected + w3·is_evidence + w4·exp(−age/τ)
    access: float = 0.25
    protected: float = 0.3
    evidence: float = 0.2
    freshness: float = 0.25
    freshness_tau_days: float = 30.0


STRENGTH_SCALE = {"gentle": 0.5, "normal": 1.0, "strong": 1.5}  # the forgetting dial multiplies τ


@dataclass(frozen=True)
class ForgettingSettings:
    # 001: retention P = 1 / (1 + exp(−(α·recency + β·relevance + γ·importance))); forget below τ.
    alpha: float = 3.0
    beta: float = 2.0
    gamma: float = 4.0
    bias: float = -3.0  # 001: the offset; an unused, unimportant turn falls below τ in weeks, a fact in months
    threshold: float = 0.2  # 001: τ, the retention below which a memory is forgotten (compacted or archived)
    strength: str = "normal"  # 001's tunable forgetting as a user's dial: gentle / normal / strong scale τ
    min_age_days: float = 7.0  # KenLM: forgetting is for what has faded; nothing younger is ever forgotten
    recency_half_life_days: float = 30.0  # 001: recency = 2^(−days since last use / half-life)
    context_episodes: int = 50  # 001: "recent context" = the centroid of the newest episodes
    fact_half_life_factor: float = 3.0  # 001/KenLM: a fact fades this many times slower than a conversation turn
    learn: bool = True  # 001: α, β, γ and the bias are learnt from the user's restores (core.memory.learned)

    def effective_threshold(self) -> float:
        """τ scaled by the strength dial (gentle ½, strong 1½), below 1."""
        return min(0.99, self.threshold * STRENGTH_SCALE.get(self.strength, 1.0))


@dataclass(frozen=True)
class ReflectionSettings:
    initial_confidence: float = 0.3  # KenLM: conservative start
    evidence_step: float = 0.15  # KenLM: rise per new conversation the evidence comes from
    max_confidence: float = 0.95  # KenLM: evidence alone never makes a claim certain; the user confirms it
    confirm_threshold: float = 0.7  # KenLM: shown to the user as "ready to confirm"
    max_tool_calls: int = 3  # KenLM: bounded search-past-episodes loop during reflection
    session_gap_minutes: float = 30.0  # KenLM reflects at session end: a conversation this quiet has ended
    search_results: int = 5  # KenLM: episodes returned by one call of the reflection's search tool
    reopen_new_evidence: int = 2  # KenLM: a rejected hypothesis reopens only with this many NEW episodes
    max_instructions_chars: int = 600  # KenLM: the behavioural meta-prompt stays short
    consolidation_window_days: float = 30.0  # 001: episodes this recent are clustered
    cluster_similarity: float = 0.6  # 001: cosine to a cluster's centroid to join it
    min_cluster_size: int = 2  # 001: a summary stands for at least two episodes
    batch_size: int = 200  # not a seed's: consolidation can stop between batches when the user returns


@dataclass(frozen=True)
class GroundingSettings:
    # Issue 17: whatever a model says, only what the user's words support is kept (core.memory.grounding).
    # MAGS keeps a confidence per triple but names no floor; this is KenLM's conservative starting confidence
    # (ReflectionSettings.initial_confidence): a fact its own extractor believes less than a fresh hypothesis is
    # not kept. A real small model gave 0 for the junk triple (Lina, id_111111, Lina).
    min_fact_confidence: float = 0.3
    min_support: float = 0.5  # not a seed's: half a claim's content words must be in the user's words it cites
    min_support_cosine: float = 0.4  # or MiniLM puts them this close (measured: related 0.31-0.76, unrelated ≤ 0.23)
    min_goal_support: float = 0.3  # a question asks what was NOT said: a third of its words in what was
    min_summary_support: float = 0.5  # a summary sentence keeps half its content words from its conversations
    min_related_cosine: float = 0.4  # reconcile acts on a fact this close (same topic 0.42-0.86, other 0.23-0.32)
    # Not a seed's: plain first-person English ("I live in Lisbon") is learned without the model too
    # (core.memory.said_facts); a weak model proposes few facts, and grounding drops its wrong ones.
    plain_facts: bool = True


@dataclass(frozen=True)
class SchedulerSettings:
    idle_minutes: float = 10.0  # KenLM's idle-time work: start once the user has been away this long
    quiet_hours_start: str = "01:00"  # KenLM's long-term step, fine-tuning, runs overnight only
    quiet_hours_end: str = "06:00"
    require_ac_power: bool = True  # heavy jobs wait for the charger (unknown counts as on power)


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.7  # not a seed's: the sampling the curated instruct models are tuned for
    top_p: float = 0.9
    max_tokens: int = 1024  # the longest reply
    context_tokens: int = 8192  # never more than the model's own window
    engram_max_facts: int = 6  # MAGS: facts extracted from one exchange
    reconcile_candidates: int = 5  # MAGS: similar facts the model compares a new fact with
    duplicate_confidence_step: float = 0.1  # MAGS: a repeated fact grows more certain
    critical_first: int = 12  # R-Memory: critical facts always put first in the context
    history_turns: int = 6  # this session's latest turns kept in the context
    intent_threshold: float = 0.45  # R-Memory: cosine to an intent's closest example request
    profile_limit: int = 12  # KenLM: confirmed hypotheses put in the context
    dial_light: float = 0.5  # memory dial "light" recalls this share of recall.k ("off" none, "normal" all)
    dial_eager: float = 2.0  # memory dial "eager" recalls this multiple of recall.k


@dataclass(frozen=True)
class Settings:
    data_dir: str = ""  # empty: the platform's application-support folder (ENGRAM_HOME overrides)
    chat_model: str = ""  # repo id or local folder; empty: none chosen yet
    embedder: str = "all-MiniLM-L6-v2"
    memory_dial: str = "normal"  # off / light / normal / eager
    appearance: str = "system"  # system (follow the OS's light/dark mode) / light / dark
    memories_view: str = "simple"  # the Memories panel: "simple" (what Engram believes about you) / "full" (the table)
    serve_api: bool = False  # the window serves the OpenAI-compatible API (app.serve.in_app); off until switched on
    serve_port: int = 8741  # on 127.0.0.1, as `engram serve --port` defaults
    recall: RecallSettings = field(default_factory=RecallSettings)
    hebbian: HebbianSettings = field(default_factory=HebbianSettings)
    importance: ImportanceWeights = field(default_factory=ImportanceWeights)
    forgetting: ForgettingSettings = field(default_factory=ForgettingSettings)
    reflection: ReflectionSettings = field(default_factory=ReflectionSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    grounding: GroundingSettings = field(default_factory=GroundingSettings)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Settings":
        return _from_dict(cls, data or {})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


def _from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        return cls()
    defaults = cls()
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        default = getattr(defaults, f.name)
        raw = data[f.name]
        if dataclasses.is_dataclass(default):
            values[f.name] = _from_dict(type(default), raw)
        else:
            coerced = _coerce(raw, type(default))
            if coerced is not None:
                values[f.name] = coerced
    return cls(**values)


def _coerce(raw: Any, kind: type) -> Any:
    if kind is bool:
        return raw if isinstance(raw, bool) else None
    if kind is float and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if kind is int and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if kind is str and isinstance(raw, str):
        return raw
    return None


def default_data_dir(env: Mapping[str, str] | None = None, platform: str | None = None,
                     home: Path | None = None) -> Path:
    """Where Engram keeps its one database file: ENGRAM_HOME, else the platform's app-data folder."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    if env.get("ENGRAM_HOME"):
        return Path(env["ENGRAM_HOME"]).expanduser()
    if platform == "darwin":
        return home / "Library" / "Application Support" / APP_NAME
    if platform.startswith("win"):
        return Path(env.get("APPDATA", home / "AppData" / "Roaming")) / APP_NAME
    base = env.get("XDG_DATA_HOME") or str(home / ".local" / "share")
    return Path(base) / "engram"


def resolve_data_dir(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("ENGRAM_HOME"):
        return default_data_dir(env)
    return Path(settings.data_dir).expanduser() if settings.data_dir else default_data_dir(env)


def ensure_private_dir(path: Path) -> Path:
    """Create the data folder readable by the user alone (0700). A folder that already exists keeps its mode:
    Engram tightens only what it created (a shared 1777 folder given as --data-dir must stay shared)."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # mkdir's mode is narrowed by the umask, never widened; make it exact
    return path


def load_settings(data_dir: Path) -> Settings:
    path = data_dir / SETTINGS_FILENAME
    try:
        return Settings.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return Settings()
    except (OSError, ValueError):
        return Settings()  # a damaged settings file falls back to defaults; the file is left for the user


def save_settings(settings: Settings, data_dir: Path) -> None:
    _write_settings_file(data_dir, settings.to_dict())


def settings_changes(before: Settings, after: Settings) -> dict[str, Any]:
    """The fields `after` changes from `before`, nested as in the file: what one save should write."""
    return _changed(before.to_dict(), after.to_dict())


def update_settings(data_dir: Path, changes: Mapping[str, Any]) -> Settings:
    """Merge `changes` into the settings file as it is on disk now, and return what it then says.

    Another process (`engram models use`, the app) may have written other fields since this one read the file:
    writing a whole Settings object would put its stale values back. Keys this version does not know are kept.
    """
    path = data_dir / SETTINGS_FILENAME
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = {}  # missing or damaged: the changes go over the defaults, as load_settings reads it
    merged = _merged(current if isinstance(current, dict) else {}, changes)
    _write_settings_file(data_dir, merged)
    return Settings.from_dict(merged)


def with_changes(settings: Settings, changes: Mapping[str, Any]) -> Settings:
    """`settings` with `changes` (as settings_changes returns them) laid over it."""
    return Settings.from_dict(_merged(settings.to_dict(), changes))


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            nested = _changed(old, value)
            if nested:
                changes[key] = nested
        elif value != old:
            changes[key] = value
    return changes


def _merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in changes.items():
        old = merged.get(key)
        merged[key] = _merged(old, value) if isinstance(value, Mapping) and isinstance(old, Mapping) else value
    return merged


def _write_settings_file(data_dir: Path, data: Mapping[str, Any]) -> None:
    ensure_private_dir(data_dir)
    path = data_dir / SETTINGS_FILENAME
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")  # per process: the app and a CLI may save at once
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)  # one rename: a reader (the app's file watcher) never sees half a file
