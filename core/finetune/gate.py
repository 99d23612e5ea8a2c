"""The evaluation gate: a new adapter replaces the active one only if it knows the user's facts better
(lower loss on held-out fact probes) without getting worse at general text (perplexity within a margin).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Scores:
    """What the evaluator measured for one model state (base, active adapter, or candidate)."""

    probe_loss: float  # mean cross-entropy per answer token over the held-out fact probes
    general_ppl: float  # perplexity over GENERAL_TEXT


@dataclass(frozen=True)
class GateSettings:
    min_probe_improvement: float = 0.02  # relative drop in probe loss the candidate must reach
    max_general_ppl_rise: float = 0.10  # relative rise in general perplexity tolerated


@dataclass(frozen=True)
class GateDecision:
    accept: bool
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"accept": self.accept, "reasons": list(self.reasons)}


def decide(baseline: Scores, candidate: Scores, settings: GateSettings = GateSettings()) -> GateDecision:
    reasons = []
    values = (baseline.probe_loss, baseline.general_ppl, candidate.probe_loss, candidate.general_ppl)
    if not all(math.isfinite(v) for v in values):
        return GateDecision(False, ["a score is not a finite number (the training diverged)"])
    needed = baseline.probe_loss * (1.0 - settings.min_probe_improvement)
    probes_ok = candidate.probe_loss <= needed
    reasons.append(f"fact probes: loss {baseline.probe_loss:.3f} -> {candidate.probe_loss:.3f} "
                   f"({'better' if probes_ok else 'not better'}; needed <= {needed:.3f})")
    ceiling = baseline.general_ppl * (1.0 + settings.max_general_ppl_rise)
    general_ok = candidate.general_ppl <= ceiling
    reasons.append(f"general text: perplexity {baseline.general_ppl:.2f} -> {candidate.general_ppl:.2f} "
                   f"({'within' if general_ok else 'beyond'} the margin; ceiling {ceiling:.2f})")
    return GateDecision(probes_ok and general_ok, reasons)
