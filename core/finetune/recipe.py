"""How hard to train, chosen from how much there is to learn.

One recipe for every store over-trained the small ones: eight epochs at one learning rate gave a first-hour store's
~15 examples ~32 steps, where the gate bench's accepted SmolLM2 run (bench/finetune.py --gate) took 2 steps at
5e-4 and its 12-step run was rejected for damaging plain text. So, for n training examples:

- below MIN_EXAMPLES nothing is queued (`readiness` says why: the Jobs panel and `engram finetune` show it);
- batch = min(4, n); PASSES = 2 passes over the data, at least MIN_STEPS and at most MAX_STEPS steps:
  steps = clamp(ceil(2n / batch), 2, 200);
- learning rate 5e-4 up to 16 examples, then falling as 1/sqrt(n/16) (more steps need smaller ones), never
  under 1e-4;
- LoRA rank and layers grow with the data: rank 4 on 4 layers under 64 examples, 8 on 8 under 512, else 16 on 16;
  scale stays mlx-lm's 20;
- the gate's own measures are read every eval_every steps (about four times a run): training stops early and keeps
  the best weights once plain text or known facts leave the gate's margins or the probes stop improving;
- too hot for this model: when the very first reading already has plain text or known facts outside the gate's
  margins, no weights of the run can be kept, so it starts again from the base at a COOLING_FACTOR smaller
  learning rate, at most MAX_COOLINGS times. The rates were set on SmolLM2-135M; Qwen2.5-0.5B's known-fact loss
  went 0.52 -> 3.70 after two steps at 5e-4 (bench/notes.md, 2026-11-29), and a larger model on a Mac is likelier
  still to need a gentler rate;
- objective "orpo" (a preference-pair term added to the plain loss, models/train_worker.py) when there are at
  least MIN_PAIRS kept-versus-rejected pairs, else plain "sft".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.store.db import Database

MIN_EXAMPLES = 4
MIN_PROBES = 1
MIN_PAIRS = 2
PASSES = 2
MIN_STEPS, MAX_STEPS = 2, 200
MAX_BATCH = 4
TOP_LEARNING_RATE, LOWEST_LEARNING_RATE = 5e-4, 1e-4
FULL_RATE_EXAMPLES = 16
EVALS_PER_RUN = 4
COOLING_FACTOR, MAX_COOLINGS = 4, 2


@dataclass(frozen=True)
class Recipe:
    steps: int
    learning_rate: float
    rank: int
    num_layers: int
    batch_size: int
    scale: float = 20.0
    objective: str = "sft"
    eval_every: int = 1


def recipe_for(examples: int, pairs: int = 0) -> Recipe:
    """The recipe for `examples` training examples and `pairs` preference pairs (examples >= MIN_EXAMPLES)."""
    if examples < 1:
        raise ValueError("a recipe needs at least one example")
    batch = min(MAX_BATCH, examples)
    steps = min(MAX_STEPS, max(MIN_STEPS, math.ceil(PASSES * examples / batch)))
    rate = max(LOWEST_LEARNING_RATE, TOP_LEARNING_RATE * min(1.0, math.sqrt(FULL_RATE_EXAMPLES / examples)))
    rank = 4 if examples < 64 else 8 if examples < 512 else 16
    return Recipe(steps=steps, learning_rate=rate, rank=rank, num_layers=rank, batch_size=batch,
                  objective="orpo" if pairs >= MIN_PAIRS else "sft", eval_every=max(1, steps // EVALS_PER_RUN))


def cooler_rate(rate: float, coolings: int) -> float | None:
    """The learning rate to start again at after a run was too hot at `rate` (None: it has been cooled enough)."""
    return rate / COOLING_FACTOR if coolings < MAX_COOLINGS and math.isfinite(rate) else None


def readiness(examples: int, probes: int) -> str:
    """Why no fine-tune should be queued for this training set ("" when one should)."""
    if examples < MIN_EXAMPLES:
        return (f"not enough to learn how you like answers yet: {examples} example"
                f"{'' if examples == 1 else 's'} (at least {MIN_EXAMPLES}). Confirm a preference in Hypotheses, "
                "rate replies you like, or tell Engram how to answer from now on (\"metric units\", \"shorter "
                "answers\"); facts stay in memory and are never trained on.")
    if probes < MIN_PROBES:
        return "nothing held out to check an adapter against yet: confirm a preference or rate more replies."
    return ""


def why_not_ready(db: "Database") -> str:
    """Why the store cannot be fine-tuned now ("" when it can): the nightly plan, the Jobs panel and
    `engram finetune` say the same."""
    from core.finetune.dataset import build_training_set
    training = build_training_set(db)
    return readiness(training.size, len(training.probes))


def readiness_key(db: "Database") -> tuple:
    """What the answer of why_not_ready depends on, read in a few aggregate scans: the same key, the same answer."""
    # aggregates: always one row each
    episodes = db.query("SELECT max(id) AS m, count(*) AS n, total(rating) AS r, total(deleted_at) AS d, "
                        "total(forgotten_at) AS f, total(length(metadata)) AS j FROM episodes")[0]
    other = db.query("SELECT (SELECT max(updated_at) FROM hypotheses) AS h, (SELECT count(*) FROM memories) AS n, "
                     "(SELECT max(updated_at) FROM memories) AS u, (SELECT total(deleted_at) FROM sessions) AS s")[0]
    return tuple(episodes.values()) + tuple(other.values())
