"""Early stopping on the gate's own measures (core.finetune.gate), inside the training process.

Every `every` steps the model as trained so far is scored as the gate will score it: held-out probes, plain-text
perplexity, known facts. The weights with the lowest probe loss that keep plain text and known facts within the
gate's margins of the base model are kept; training stops once the margins are crossed (more steps only damage
more) or the probes have not improved for PATIENCE readings. The base is scored before the first step (LoRA starts
as an exact no-op) and kept in the run folder, so a resumed run compares with the same figures; so are the kept
weights' scores, which the gate then reads instead of loading the model again to score the same weights on the
same sets (models.finetune).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from models.adapter_scores import gate_scores

PATIENCE = 2


@dataclass
class EarlyStop:
    config: dict  # {"every", "probes", "general", "known_facts", "min_probe_improvement", "max_general_ppl_rise",
    #                "max_known_fact_loss_rise"}
    folder: Path
    emit: Callable[..., None]
    base: Optional[dict] = None
    best: Optional[dict] = None
    last: Optional[dict] = None  # the latest reading: the weights kept when no reading was inside the margins
    misses: int = 0
    history: list = field(default_factory=list)

    @property
    def every(self) -> int:
        return max(1, int(self.config.get("every", 1)))

    def _score(self, model: Any, tokenizer: Any) -> dict:
        model.eval()
        try:
            return gate_scores(model, tokenizer, self.config["probes"], self.config["general"],
                               self.config.get("known_facts") or [])
        finally:
            model.train()

    def start(self, model: Any, tokenizer: Any) -> None:
        state = self.folder / "early_stop.json"
        if state.exists():
            saved = json.loads(state.read_text())
            self.base, self.best, self.misses = saved["base"], saved.get("best"), saved.get("misses", 0)
            self.last = saved.get("last")
            return
        self.base = self._score(model, tokenizer)
        self.emit("evaluated", step=0, scores=self.base, verdict="base")
        self._save()

    def check(self, step: int, model: Any, tokenizer: Any, save_best: Callable[[], None]) -> bool:
        """Score the weights after `step` steps; True when training should stop here."""
        scores = self._score(model, tokenizer)
        assert self.base is not None
        self.last = {**scores, "step": step}
        ppl_ok = scores["general_ppl"] <= self.base["general_ppl"] * (1 + self.config["max_general_ppl_rise"])
        known_ok = (scores["known_fact_loss"] is None or self.base["known_fact_loss"] is None
                    or scores["known_fact_loss"] <= self.base["known_fact_loss"]
                    * (1 + self.config["max_known_fact_loss_rise"]))
        better = self.best is None or scores["probe_loss"] < self.best["probe_loss"]
        if not (ppl_ok and known_ok):
            verdict = "stop: plain text or known facts left the gate's margins; keeping the best weights"
        elif better:
            self.best, self.misses = {**scores, "step": step}, 0
            save_best()
            verdict = "best so far"
        else:
            self.misses += 1
            verdict = "stop: the probes stopped improving" if self.misses >= PATIENCE else "no better"
        self.emit("evaluated", step=step, scores=scores, verdict=verdict)
        self._save()
        return verdict.startswith("stop")

    def _save(self) -> None:
        (self.folder / "early_stop.json").write_text(json.dumps({"base": self.base, "best": self.best,
                                                                 "last": self.last, "misses": self.misses}))


def first_reading_broke_margins(folder: Path) -> Optional[dict]:
    """The first reading of a finished run when it was already outside the gate's margins (so no weights of the run
    are worth keeping), else None. The first reading inside the margins always becomes `best`."""
    state = folder / "early_stop.json"
    if not state.exists():
        return None
    saved = json.loads(state.read_text())
    return saved.get("last") if saved.get("best") is None and saved.get("last") else None


def start_again(folder: Path) -> None:
    """Empty a run's adapter folder (weights, checkpoint, readings) but keep the base model's scores: a run started
    again on the same model and sets scores the same base, so it is not scored twice."""
    state = folder / "early_stop.json"
    base = json.loads(state.read_text()).get("base") if state.exists() else None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    if base is not None:
        state.write_text(json.dumps({"base": base, "best": None, "last": None, "misses": 0}))


def kept_scores(folder: Path) -> tuple[Optional[dict], Optional[dict]]:
    """(base, kept) as a finished run's early stop measured them: the base model's scores and those of the weights
    the run kept (the best reading inside the margins, else the last). (None, None) without an early stop."""
    state = folder / "early_stop.json"
    if not state.exists():
        return None, None
    saved = json.loads(state.read_text())
    return saved.get("base"), saved.get("best") or saved.get("last")
