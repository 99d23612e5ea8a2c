"""Means of bench/answers.py's per-question scores, per data set, category and condition, and a Markdown table."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

METRICS = ("f1", "f1_corrected", "rubric", "order", "correct", "evidence_recall", "seconds")


def summarise(records: Sequence[dict[str, Any]], conditions: Sequence[str]) -> dict[str, Any]:
    """{dataset: {category | "all": {condition: {n, metric means}}}}; "correct" is abstention accuracy on
    abstention questions and knowledge-update accuracy on update questions (their categories say which)."""
    values: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    for record in records:
        for condition in conditions:
            scores = record.get(condition)
            if scores is None:
                continue
            for group in (record["category"], "all"):
                bucket = values[record["dataset"]][group][condition]
                bucket["n"].append(1)
                for metric in METRICS:
                    value = scores.get(metric)
                    if value is not None and not (group == "all" and metric == "correct"):
                        bucket[metric].append(float(value))
    return {dataset: {group: {condition: {"n": len(m["n"]), **{k: round(sum(v) / len(v), 4)
                                                               for k, v in m.items() if k != "n" and v}}
                              for condition, m in by_condition.items()}
                      for group, by_condition in groups.items()}
            for dataset, groups in values.items()}


def table(result: dict[str, Any]) -> str:
    """Rows: data set × category; columns: each condition's main score (F1 corrected / rubric / accuracy), the
    evidence recall of Engram and seconds per question."""
    conditions = result["conditions"]
    head = ["data set", "category", "n"] + [f"{c}" for c in conditions] + ["engram evidence recall", "s/question"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for dataset, groups in result["summary"].items():
        for group, by_condition in sorted(groups.items(), key=lambda g: (g[0] == "all", g[0])):
            metric = main_metric(by_condition.get(conditions[0], {}))
            cells = [f"{by_condition.get(c, {}).get(metric, float('nan')):.3f}" for c in conditions]
            engram = by_condition.get("engram", {})
            recall = engram.get("evidence_recall")
            seconds = [by_condition.get(c, {}).get("seconds") for c in conditions]
            time_cell = " / ".join(f"{s:.1f}" for s in seconds if s is not None)
            lines.append(f"| {dataset} | {group} ({metric}) | {engram.get('n', 0)} | " + " | ".join(cells) +
                         f" | {'' if recall is None else f'{recall:.2f}'} | {time_cell} |")
    return "\n".join(lines)


def main_metric(scores: dict[str, Any]) -> str:
    for metric in ("correct", "f1_corrected", "order", "rubric"):
        if metric in scores:
            return metric
    return "evidence_recall"
