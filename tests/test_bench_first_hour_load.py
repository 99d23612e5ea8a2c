"""bench/first_hour_load.py runs end to end (no burners here: the machine is shared) and reports both times, what
Reflect now said it waited for, and the target; its scripted structured model answers any schema validly."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from bench import first_hour_load  # noqa: E402
from tests.fakes import validate  # noqa: E402


def test_the_smallest_answer_fits_each_schema_learning_and_reflection_ask_for():
    from core.prompts.consolidate import summary_schema
    from core.prompts.engram import facts_schema
    from core.prompts.rating import rating_schema
    from core.prompts.reconcile import reconcile_schema
    from core.prompts.reflect import instructions_schema, reflection_schema
    for schema in (summary_schema(), facts_schema(6), rating_schema(4), reconcile_schema(5),
                   reflection_schema([3, 4], [1]), instructions_schema(400)):
        assert validate(first_hour_load.smallest(schema), schema) == [], schema.get("title")


def test_the_bench_reports_both_starts_and_what_it_waited_for(qtbot, capsys):
    result = first_hour_load.main(["--burners", "0", "--model-seconds", "0.4", "--target-seconds", "120",
                                   "--limit-seconds", "120"])
    for phase in ("baseline", "loaded"):
        assert result[phase]["quiet_to_learning_s"] >= 0 and result[phase]["run_now_to_reflection_s"] >= 0
        assert result[phase]["waited_for"].startswith("Reflection starts")
    assert result["within_target"] is True and '"bench": "first_hour_load"' in capsys.readouterr().out
