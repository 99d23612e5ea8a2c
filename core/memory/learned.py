"""Retention weights learnt from the user's own signals (seed 001's α, β, γ learnt rather than fixed).

What the user does with forgetting is a label on an item's terms: restoring a forgotten item says "keep things
like this" (y = 1); a forgotten item left forgotten for `SILENCE_DAYS` says the forgetting was right (y = 0).
The retention model is already a logistic one, P = σ(α·recency + β·relevance + γ·importance + δ·preference +
bias), forgetting below τ; so the simplest learner that fits is a regularised logistic regression, updated online
on the log-loss of "kept" at the boundary logit(τ) (silence weighted SILENCE_WEIGHT, and counted only once the
user has restored something: a user who never looks at forgetting keeps the documented defaults). The signals a
pass finds are one step, on their mean gradient:

    g = mean((y − σ(w·x − logit τ))·x) − λ·(w − w₀);  G ← G + g²;  w ← w + η·g / (√G + ε),  clipped to BOUNDS

(core.memory.online_logistic.batch_step: recall's learnt blend takes the same update a signal at a time), a
per-weight step (AdaGrad): the terms differ in scale (a forgotten item's relevance is often ~0.1, the bias's
input is 1), so one shared step let the bias swing while β hardly moved. One step a pass, not one a signal:
labels come in bursts (a week's review of the log restores a dozen items; their silences arrive together two
weeks later), and a step per signal swung the bias by a unit each way, the store then losing a hundred items in a
night (bench/forgetting.py, seeds 3, 11, 21: 69–87 wrongful forgets against 22–32 with fixed weights).
λ pulls towards the defaults w₀ (few signals barely move anything), and at every forgetting pass a store-size
term, the gradient of μ·mean(P) over the store (with the same pull), leans towards forgetting, as the seed's reward
penalises memory size. Until the first signal the weights are exactly the defaults; after it, the size term alone
moves them at most μ/4λ from where the signals put them. The signals are taken at each pass
(core.memory.forget.learn_from_signals), with the recency and importance the item was forgotten with and its
relevance and preference at that pass.
δ weighs preference (core.memory.preference: what the user's restores, silences and the memories their replies
used say about items like this one), the only term about content: α, β, γ and the bias move one boundary for the
whole store, while what a user asks back is usually a topic (their family, not their errands). Preference is 0 for
a user without both kinds of answer, so δ's default can be 1, the neighbours' log-odds as they are (a fresh user
is unaffected); learnt, it stays in its BOUNDS, and 0 turns it off.
No policy gradient: there is no episode return to estimate, only a label per item, and a logistic update is
stable with a handful of signals. τ itself stays the user's strength dial: it and the bias move the same
boundary, so learning both would be unidentifiable. Pinned, protected, permanent and critical memories are never
scored at all (core.memory.retention), whatever the weights.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numpy as np

from core.config import Settings
from core.memory import online_logistic as ol
from core.store import turns
from core.store.db import Database
from core.words import counted

META_KEY = "learned_retention"
NAMES = ("alpha", "beta", "gamma", "bias", "delta")  # the order of vector() and of an item's terms, then 1, then δ's
BOUNDS = {"alpha": (0.5, 8.0), "beta": (0.0, 8.0), "gamma": (0.5, 10.0), "bias": (-8.0, 0.0), "delta": (0.0, 3.0)}
DELTA_DEFAULT = 1.0  # δ: preference is log-odds, so 1 adds the neighbours' evidence as it is (naive Bayes)
PREFERENCE_LIMIT = 3.0  # preference's range (log-odds): δ·preference moves a logit by at most 9
LEARNING_RATE = 0.25  # η: the most one pass's signals move a weight (AdaGrad)
# ε: with ε ≪ |g| AdaGrad's first steps are ≈ η·sign(g) whatever g's size, so a pass whose signals nearly agree
# with the weights (tiny g) moved them as far as one that contradicts them; 0.5 keeps a step in proportion to its
# evidence until G has grown (bench/forgetting.py, this alone over 10 users: store no larger than with fixed
# weights in all 10, 6 with 0.05)
ADAGRAD_EPSILON = 0.5
PULL_TO_DEFAULTS = 0.02  # λ
STEP = ol.StepSize(rate=LEARNING_RATE, epsilon=ADAGRAD_EPSILON, pull=PULL_TO_DEFAULTS)
SIZE_PENALTY = 0.01  # μ: with λ it bounds how far the size term alone moves the weights (μ/4λ in the bias)
SILENCE_DAYS = 14.0  # a forgotten item not asked back for this long was rightly forgotten
SILENCE_WEIGHT = 0.2  # silence is weaker evidence than a restore: the user may simply not have looked (was 0.25)
LABELS = ("recency", "relevance", "importance", "offset", "likeness to what you restored")  # for describe, by NAMES


@dataclass(frozen=True)
class LearnedRetention:
    alpha: float
    beta: float
    gamma: float
    bias: float
    kept_signals: int = 0  # restores
    forgot_signals: int = 0  # forgettings left alone
    squared: tuple[float, ...] = (0.0,) * len(NAMES)  # AdaGrad: each weight's sum of squared signal gradients
    delta: float = DELTA_DEFAULT  # preference: likeness to what the user restored rather than left forgotten

    @property
    def signals(self) -> int:
        return self.kept_signals + self.forgot_signals

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in NAMES])


def defaults(settings: Settings) -> LearnedRetention:
    f = settings.forgetting
    return LearnedRetention(f.alpha, f.beta, f.gamma, f.bias, delta=DELTA_DEFAULT)


def _with_vector(learned: LearnedRetention, w: np.ndarray, **changes) -> LearnedRetention:
    return replace(learned, **dict(zip(NAMES, w.tolist())), **changes)


def load(db: Database, settings: Settings) -> LearnedRetention:
    raw = db.scalar("SELECT value FROM meta WHERE key = ?", (META_KEY,))
    if not raw:
        return defaults(settings)
    try:
        return _parsed(json.loads(raw))
    except (TypeError, ValueError):
        return defaults(settings)  # a damaged record starts over rather than breaking forgetting


def _parsed(record: object) -> LearnedRetention:
    """The stored record, checked field by field (ValueError for anything a save could not have written)."""
    if not isinstance(record, dict):
        raise ValueError("learned weights must be a JSON object")
    record = {"delta": DELTA_DEFAULT, **record}  # a record from before preference has no δ
    weights = {name: record[name] for name in NAMES if _is_number(record.get(name))}
    counts = {name: record.get(name, 0) for name in ("kept_signals", "forgot_signals")}
    squared = record.get("squared", [0.0] * len(NAMES))  # a record from before AdaGrad has none
    if isinstance(squared, list) and len(squared) == len(NAMES) - 1:
        squared = [*squared, 0.0]  # nor δ's step history
    if len(weights) != len(NAMES) or not all(type(c) is int and c >= 0 for c in counts.values()):
        raise ValueError("learned weights record is incomplete")
    if not (isinstance(squared, list) and len(squared) == len(NAMES)
            and all(_is_number(v) and 0 <= v < math.inf for v in squared)):
        raise ValueError("learned weights record has a damaged step history")
    floats: dict[str, Any] = {k: float(v) for k, v in weights.items()}
    return _clipped(LearnedRetention(**floats, **counts,
                                     squared=tuple(float(v) for v in squared)))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def save(db: Database, learned: LearnedRetention) -> None:
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
               (META_KEY, json.dumps(asdict(learned))))


def reset(db: Database) -> None:
    with db.transaction():
        db.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))


def describe(db: Database, settings: Settings) -> str:
    """One line for the user: the weights forgetting uses, what they were learnt from, against the defaults."""
    if not settings.forgetting.learn:
        return "Learning is off (forgetting.learn): forgetting uses the default weights."
    weights, start = load(db, settings), defaults(settings)
    used = len(turns.kept_by_replies(db)) + len(turns.used_turns(db))  # preference's third kind of answer
    if weights.signals == 0 and used:  # the uses already steer preference, at its default weight
        return (f"No weight learnt yet (nothing restored or left alone): forgetting uses the default weights and "
                f"keeps longer what is like the {counted(used, 'memory or turn', 'memories and turns')} your "
                "replies used.")
    if weights.signals == 0:
        return "Nothing learnt yet: forgetting uses the default weights until you restore something it forgot."
    terms = ", ".join(f"{label} {getattr(weights, name):.2f} (default {getattr(start, name):.2f})"
                      for name, label in zip(NAMES, LABELS))
    return (f"Learnt from {counted(weights.kept_signals, 'restore')}, "
            f"{counted(weights.forgot_signals, 'forgetting')} left alone and "
            f"{counted(used, 'memory or turn', 'memories and turns')} your replies used: {terms}.")


def effective(db: Database, settings: Settings) -> Settings:
    """Settings with the learnt weights in place of the defaults (when learning is on); δ is not a setting
    (core.memory.retention.content_weight)."""
    if not settings.forgetting.learn:
        return settings
    learned = load(db, settings)
    return replace(settings, forgetting=replace(settings.forgetting, alpha=learned.alpha, beta=learned.beta,
                                                gamma=learned.gamma, bias=learned.bias))


def step(learned: LearnedRetention, terms: Sequence[float], kept: bool, settings: Settings) -> LearnedRetention:
    """One signal: the item's (recency, relevance, importance[, preference]) and whether the user wanted it kept
    (a restore) or not (silence, weighted SILENCE_WEIGHT)."""
    return batch_step(learned, [terms], [kept], settings)


def batch_step(learned: LearnedRetention, terms: Sequence[Sequence[float]], kept: Sequence[bool],
               settings: Settings) -> LearnedRetention:
    """The signals one pass found, as one step on their mean gradient: a week's review of the log (a burst of
    restores) or the silences two weeks later move each weight by at most η, as one signal does."""
    if len(terms) == 0:
        return learned
    x = _inputs(np.array([list(t) + [0.0] * (4 - len(t)) for t in terms], dtype=np.float64))
    y = np.array([1.0 if k else 0.0 for k in kept])
    w, squared = ol.batch_step(learned.vector(), np.array(learned.squared), x, y, anchor=defaults(settings).vector(),
                               size=STEP, weight=np.where(y > 0, 1.0, SILENCE_WEIGHT),
                               offset=-_logit(_threshold(settings)))
    counts = {"kept_signals": learned.kept_signals + int(y.sum()), "forgot_signals": learned.forgot_signals
              + int(len(y) - y.sum())}
    return _clipped(_with_vector(learned, w, **counts, squared=tuple(squared.tolist())))


def size_step(learned: LearnedRetention, terms: np.ndarray, settings: Settings) -> LearnedRetention:
    """The store-size penalty: one step down the gradient of μ·mean(P) over the store's items (rows of terms:
    recency, relevance, importance[, preference])."""
    if len(terms) == 0 or learned.signals == 0:  # no signal yet: the weights are exactly the defaults
        return learned
    x = _inputs(np.asarray(terms, dtype=np.float64))
    w = learned.vector()
    p = ol.sigmoid(x @ w)
    gradient = SIZE_PENALTY * (p * (1 - p)) @ x / len(terms) + PULL_TO_DEFAULTS * (w - defaults(settings).vector())
    return _clipped(_with_vector(learned, w - LEARNING_RATE * gradient))


def _clipped(learned: LearnedRetention) -> LearnedRetention:
    values: dict[str, Any] = {name: float(min(max(getattr(learned, name), low), high))
                              for name, (low, high) in BOUNDS.items()}
    if not all(math.isfinite(v) for v in values.values()):
        raise ValueError("learned weights must be finite")
    return replace(learned, **values)


def _threshold(settings: Settings) -> float:
    return settings.forgetting.effective_threshold()


def _inputs(terms: np.ndarray) -> np.ndarray:
    """Rows of (recency, relevance, importance, 1, preference), the order of NAMES: the first three are each in
    [0, 1], preference within ±PREFERENCE_LIMIT (0 when a row has none); a damaged value is held to its range."""
    clean = np.nan_to_num(terms, nan=0.0, posinf=1.0, neginf=-1.0)
    preference = clean[:, 3] if clean.shape[1] > 3 else np.zeros(len(clean))
    preference = np.clip(preference, -PREFERENCE_LIMIT, PREFERENCE_LIMIT)
    return np.column_stack([np.clip(clean[:, :3], 0.0, 1.0), np.ones(len(clean)), preference])


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)  # a threshold set to 0 or 1 still has a boundary
    return math.log(p / (1.0 - p))

