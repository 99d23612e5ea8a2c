"""The evaluation gate: a new adapter replaces the active one only if it knows what it learnt better (lower
loss on held-out probes: the user's preferences shown in situations it never trained on, rated replies held out
whole; core.finetune.dataset) without getting
worse at general text (perplexity within a margin) or forgetting what the base model knew (the loss of the
answers to KNOWN_FACTS within a margin). Fine-tuning is for style and preferences; facts come from memory, so
an adapter that buys its probe gain by damaging plain text or common knowledge is rejected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

# A small fixed general-text set: everyday sentences unrelated to any user. Its perplexity guards against
# an adapter that learns the facts by forgetting how to write.
GENERAL_TEXT = (
    "The train to the city leaves every morning at seven and arrives shortly before eight.",
    "She opened the window, and the cool evening air filled the small room.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "He wrote a short letter to his friend and walked to the post office.",
    "The library is closed on Sundays but open late on Thursdays.",
    "A good book can keep you company on a long and rainy afternoon.",
    "They planted tomatoes, beans and a row of sunflowers in the garden.",
    "The meeting was moved to Tuesday because half of the team was away.",
    "Cats often sleep for more than twelve hours a day.",
    "After dinner we played cards and listened to music until midnight.",
    "The museum has a large collection of paintings from the last century.",
    "Please remember to bring an umbrella if it looks like rain.",
)

# Common knowledge any instruct model answers: a question and the answer whose likelihood must not fall. A fixed
# held-out set, unrelated to any user, so a candidate cannot have trained on it.
KNOWN_FACTS = (
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many days are there in a week?", "There are seven days in a week."),
    ("What colour is the sky on a clear day?", "The sky is blue on a clear day."),
    ("What do bees make?", "Bees make honey."),
    ("What is the largest ocean on Earth?", "The Pacific Ocean is the largest ocean on Earth."),
    ("What is frozen water called?", "Frozen water is called ice."),
    ("Which planet do we live on?", "We live on the planet Earth."),
    ("How many legs does a spider have?", "A spider has eight legs."),
)


@dataclass(frozen=True)
class Scores:
    """What the evaluator measured for one model state (base, active adapter, or candidate)."""

    probe_loss: float  # mean cross-entropy per answer token over the held-out probes (preferences and facts)
    general_ppl: float  # perplexity over GENERAL_TEXT
    known_fact_loss: Optional[float] = None  # mean cross-entropy per answer token over KNOWN_FACTS (None: unmeasured)


@dataclass(frozen=True)
class GateSettings:
    min_probe_improvement: float = 0.02  # relative drop in probe loss the candidate must reach
    max_general_ppl_rise: float = 0.10  # relative rise in general perplexity tolerated
    max_known_fact_loss_rise: float = 0.10  # relative rise in the known facts' answer loss tolerated


@dataclass(frozen=True)
class GateDecision:
    accept: bool
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"accept": self.accept, "reasons": list(self.reasons)}


def decide(baseline: Scores, candidate: Scores, settings: GateSettings = GateSettings()) -> GateDecision:
    """Accept only if every check passes; each check says its figures, whichever way it went."""
    both_known = baseline.known_fact_loss is not None and candidate.known_fact_loss is not None
    values = (baseline.probe_loss, baseline.general_ppl, candidate.probe_loss, candidate.general_ppl,
              *((baseline.known_fact_loss, candidate.known_fact_loss) if both_known else ()))
    if not all(math.isfinite(v) for v in values):
        return GateDecision(False, ["a score is not a finite number (the training diverged)"])
    needed = baseline.probe_loss * (1.0 - settings.min_probe_improvement)
    probes_ok = candidate.probe_loss <= needed
    reasons = [f"held-out probes: loss {baseline.probe_loss:.3f} -> {candidate.probe_loss:.3f} "
               f"({'better' if probes_ok else 'not better'}; needed <= {needed:.3f})"]
    ceiling = baseline.general_ppl * (1.0 + settings.max_general_ppl_rise)
    general_ok = candidate.general_ppl <= ceiling
    reasons.append(f"general text: perplexity {baseline.general_ppl:.2f} -> {candidate.general_ppl:.2f} "
                   f"({'within' if general_ok else 'beyond'} the margin; ceiling {ceiling:.2f})")
    known_ok = True
    # adapters scored before known facts were measured have none: nothing to compare (both_known, spelt out for mypy)
    if baseline.known_fact_loss is not None and candidate.known_fact_loss is not None:
        limit = baseline.known_fact_loss * (1.0 + settings.max_known_fact_loss_rise)
        known_ok = candidate.known_fact_loss <= limit
        reasons.append(f"known facts: loss {baseline.known_fact_loss:.3f} -> {candidate.known_fact_loss:.3f} "
                       f"({'within' if known_ok else 'beyond'} the margin; ceiling {limit:.3f})")
    return GateDecision(probes_ok and general_ok and known_ok, reasons)
