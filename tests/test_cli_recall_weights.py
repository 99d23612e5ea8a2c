"""`engram recall-weights` shows what recall learnt from the user's vetoes, pins and thumbs, and resets it."""
from __future__ import annotations

import json

from core.memory import recall_learning
from core.store.db import open_db


def test_recall_weights_show_what_was_learnt_and_reset(cli):
    code, out, _ = cli("recall-weights")
    assert code == 0 and out.startswith("Nothing learnt yet")
    db = open_db(cli.data_dir / "engram.db")
    try:
        recall_learning.save(db, recall_learning.RecallBlend(weights=(0.2, -0.5, 0.0, 0.0, 0.0), vetoes=4, pins=1))
    finally:
        db.close()
    code, out, _ = cli("recall-weights")
    assert code == 0 and out.startswith("Learnt from 4 memories removed, 1 pin:") and "shared words ×0.61" in out
    code, out, _ = cli("recall-weights", "--json")
    shown = json.loads(out)
    assert shown["terms"]["words"] == -0.5 and shown["signals"] == 5 and shown["bounds"] == [-1.0, 1.0]
    code, out, _ = cli("recall-weights", "--reset")
    assert code == 0 and "reset to the preset's blend (5 signals set aside)" in out
    assert cli("recall-weights")[1].startswith("Nothing learnt yet")
    code, _, err = cli("recall-weights", "--reset", "--json")
    assert code != 0 and "not allowed with" in err
