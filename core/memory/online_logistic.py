"""One step of a regularised online logistic regression with a per-weight (AdaGrad) step: the shared math of
the weights Engram learns from the user's own signals (recall's blend in core.memory.recall_learning, a step a
signal; retention's weights in core.memory.learned, a step a forgetting pass on the mean of its signals).

    p = σ(w·x + offset);  g = mean(weight·(y − p)·x) − λ·(w − w₀);  G ← G + g²;  w ← w + η·g / (√G + ε),  clipped.

AdaGrad because the inputs differ in scale: with one shared step a weight whose input is often near 0 hardly
moves while one whose input is always 1 swings; per weight, each moves at most η a signal and ~η·√n over n that
agree. λ pulls towards the defaults w₀, so a handful of signals barely moves anything.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepSize:
    rate: float  # η: the most one signal moves a weight
    epsilon: float  # keeps a weight whose signals carried almost nothing from jumping
    pull: float  # λ: the pull towards the defaults


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def finite(values: np.ndarray, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Inputs held to [low, high]; NaN counts as nothing, an infinity as the nearest end."""
    return np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=high, neginf=low), low, high)


def step(w: np.ndarray, squared: np.ndarray, x: np.ndarray, y: float, *, anchor: np.ndarray, size: StepSize,
         weight: float = 1.0, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """One labelled signal (y 1 or 0, counting `weight`): the new weights and AdaGrad's sums of squared gradients."""
    p = float(sigmoid(float(w @ x) + offset))
    gradient = weight * (y - p) * x - size.pull * (w - anchor)
    squared = squared + gradient ** 2
    return w + size.rate * gradient / (np.sqrt(squared) + size.epsilon), squared


def batch_step(w: np.ndarray, squared: np.ndarray, x: np.ndarray, y: np.ndarray, *, anchor: np.ndarray,
               size: StepSize, weight: np.ndarray | float = 1.0, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Several signals (rows of x, labels y, each counting weight) as one step on their mean gradient: a burst of
    labels moves each weight by at most η, as one signal does (step is this with one row)."""
    p = sigmoid(x @ w + offset)
    gradient = (weight * (y - p)) @ x / len(y) - size.pull * (w - anchor)
    squared = squared + gradient ** 2
    return w + size.rate * gradient / (np.sqrt(squared) + size.epsilon), squared


def clipped(w: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(w)):
        raise ValueError("learned weights must be finite")
    return np.minimum(np.maximum(w, low), high)
