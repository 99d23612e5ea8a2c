"""The early stop's rule on scripted scores (the real scoring runs in the fine-tune tests): keep the best weights
inside the gate's margins, stop once plain text or known facts leave them, or after PATIENCE readings without gain."""
from __future__ import annotations

import json

import models.early_stop as early_stop
from models.early_stop import PATIENCE, EarlyStop

MARGINS = {"every": 2, "probes": [], "general": [], "known_facts": [], "min_probe_improvement": 0.02,
           "max_general_ppl_rise": 0.10, "max_known_fact_loss_rise": 0.10}


class Model:
    def eval(self):
        pass

    def train(self):
        pass


def scripted(monkeypatch, readings):
    scores = iter([{"probe_loss": p, "general_ppl": g, "known_fact_loss": k} for p, g, k in readings])
    monkeypatch.setattr(early_stop, "gate_scores", lambda *args: next(scores))


def run(tmp_path, steps):
    events, saved = [], []
    stop = EarlyStop(MARGINS, tmp_path, lambda event, **data: events.append(data))
    stop.start(Model(), None)
    for step in steps:
        if stop.check(step, Model(), None, lambda step=step: saved.append(step)):
            break
    return stop, events, saved


def test_it_keeps_the_best_reading_and_stops_when_plain_text_leaves_the_margin(tmp_path, monkeypatch):
    scripted(monkeypatch, [(3.0, 50.0, 1.0), (2.5, 51.0, 1.0), (2.0, 53.0, 1.05), (1.5, 56.0, 1.0), (1.0, 60, 1)])
    stop, events, saved = run(tmp_path, [2, 4, 6, 8])
    assert saved == [2, 4]  # step 6 broke the 10% perplexity margin: training stopped, step 4 is kept
    assert stop.best["step"] == 4 and events[-1]["verdict"].startswith("stop: plain text or known facts")
    assert [e["step"] for e in events] == [0, 2, 4, 6]
    assert json.loads((tmp_path / "early_stop.json").read_text())["base"]["general_ppl"] == 50.0


def test_it_stops_when_the_probes_stop_improving_and_a_resumed_run_keeps_the_base(tmp_path, monkeypatch):
    scripted(monkeypatch, [(3.0, 50.0, 1.0), (2.0, 50.0, 1.0)] + [(2.2, 50.0, 1.0)] * PATIENCE)
    stop, events, saved = run(tmp_path, [2, 4, 6, 8, 10])
    assert saved == [2] and events[-1]["verdict"] == "stop: the probes stopped improving"
    scripted(monkeypatch, [(1.0, 50.0, 1.0)])  # resumed: the base is read back, not measured again
    again = EarlyStop(MARGINS, tmp_path, lambda event, **data: None)
    again.start(Model(), None)
    assert again.base["probe_loss"] == 3.0 and again.best["step"] == 2


def test_the_gate_reads_the_kept_weights_scores_the_best_inside_the_margins_else_the_last(tmp_path, monkeypatch):
    from models.early_stop import kept_scores
    assert kept_scores(tmp_path) == (None, None)  # no early stop in this run: the gate scores the adapter itself
    scripted(monkeypatch, [(3.0, 50.0, 1.0), (2.5, 51.0, 1.0), (2.0, 60.0, 1.0)])
    run(tmp_path, [2, 4])
    base, kept = kept_scores(tmp_path)
    assert base["probe_loss"] == 3.0 and (kept["step"], kept["probe_loss"]) == (2, 2.5)
    never = tmp_path / "never"
    never.mkdir()
    scripted(monkeypatch, [(3.0, 50.0, 1.0), (2.0, 70.0, 1.0)])  # the first reading already broke the margin
    run(never, [2])
    assert kept_scores(never)[1]["step"] == 2 and kept_scores(never)[1]["general_ppl"] == 70.0
