"""`engram recall-weights`: what recall's blend learnt from the memories you removed, pinned and rated, from how
many signals (core.memory.recall_learning), and `--reset` to go back to the preset's blend — as `engram forget
--weights` does for forgetting's weights."""
from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    weights = subparsers.add_parser("recall-weights",
                                    help="what recall learnt from the memories you removed, pinned and rated")
    mode = weights.add_mutually_exclusive_group()
    mode.add_argument("--reset", action="store_true", help="forget what was learnt: back to the preset's blend")
    mode.add_argument("--json", action="store_true", help="the weights, their bounds and the signal counts as JSON")
    weights.set_defaults(func=cmd_recall_weights)


def cmd_recall_weights(args: argparse.Namespace, services: Any) -> int:
    from core.memory import recall_learning
    from core.words import counted
    db, settings = services.db, services.settings
    if args.reset:
        signals = recall_learning.load(db).signals
        recall_learning.reset(db)
        print(f"recall weights reset to the preset's blend ({counted(signals, 'signal')} set aside)")
        return 0
    recall_learning.collect_pins(db, settings)  # pins made since the last reply count too
    if args.json:
        blend = recall_learning.load(db)
        print(json.dumps({"learn": settings.recall.learn, "terms": dict(zip(recall_learning.TERMS, blend.weights)),
                          "bounds": [-recall_learning.BOUND, recall_learning.BOUND],
                          "max_factor": recall_learning.MAX_FACTOR, "vetoes": blend.vetoes, "pins": blend.pins,
                          "rated_up": blend.rated_up, "rated_down": blend.rated_down, "signals": blend.signals},
                         indent=2))
    else:
        print(recall_learning.describe(db, settings))
    return 0
