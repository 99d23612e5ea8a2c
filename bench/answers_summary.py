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
            answered = [by_condition[c] for c in conditions if c in by_condition]  # a run cut short may lack some
            metric = main_metric({k: v for scores in answered for k, v in scores.items()}, every=group == "all")
            cells = [_cell(by_condition.get(c, {}), metric) for c in conditions]
            engram = by_condition.get("engram", {})
            recall = engram.get("evidence_recall")
            seconds = [by_condition.get(c, {}).get("seconds") for c in conditions]
            time_cell = " / ".join(f"{s:.1f}" for s in seconds if s is not None)
            name = "F1 orig / corrected" if metric == "f1_corrected" else metric
            lines.append(f"| {dataset} | {group} ({name}) | {engram.get('n', 0)} | " + " | ".join(cells) +
                         f" | {'' if recall is None else f'{recall:.2f}'} | {time_cell} |")
    return "\n".join(lines)


def _cell(scores: dict[str, Any], metric: str) -> str:
    """The main score; LoCoMo's F1 as original / corrected by the audit."""
    if metric == "f1_corrected":
        return f"{scores.get('f1', float('nan')):.3f} / {scores.get(metric, float('nan')):.3f}"
    return f"{scores.get(metric, float('nan')):.3f}"


def main_metric(scores: dict[str, Any], every: bool = False) -> str:
    """A category's reported score (event ordering: the order's tau, as BEAM's authors report it); over every
    question (`every`) BEAM's mean is the rubric's, which each of its questions has."""
    for metric in (("f1_corrected", "rubric") if every else ("correct", "f1_corrected", "order", "rubric")):
        if metric in scores:
            return metric
    return "evidence_recall"


def failure_causes(records: Sequence[dict[str, Any]], condition: str = "engram") -> dict[str, Any]:
    """Why the condition's wrong answers were wrong, read from the records: the evidence never reached the prompt
    (recall missed), it did and the reply still missed (the reader ignored it; `gold_right` says how often the
    gold-evidence prompt got it right), an answer invented where the conversation does not say, or a refusal where
    it does. Wrong: F1 (corrected) or rubric below 0.5, or an abstention / update check failed."""
    causes: dict[str, list[str]] = defaultdict(list)
    gold_right = 0
    for record in records:
        scores = record.get(condition)
        if scores is None or not _wrong(scores):
            continue
        if record["abstain"]:
            causes["invented where the conversation does not say"].append(record["id"])
            continue
        if scores.get("abstained"):
            causes["said it does not know where the conversation says"].append(record["id"])
        elif (scores.get("evidence_recall") or 0.0) < 1.0:
            causes["recall missed (evidence not all in the prompt)"].append(record["id"])
        else:
            causes["reader ignored the evidence in the prompt"].append(record["id"])
            gold_right += not _wrong(record.get("gold", scores))
    return {"counts": {k: len(v) for k, v in causes.items()}, "examples": {k: v[:5] for k, v in causes.items()},
            "ignored_but_gold_right": gold_right}


def _wrong(scores: dict[str, Any]) -> bool:
    if "correct" in scores:
        return not scores["correct"]
    value = scores.get("f1_corrected", scores.get("rubric"))
    return value is not None and value < 0.5


if __name__ == "__main__":  # python -m bench.answers_summary bench/results/answers-*.json: the tables of saved runs
    import json
    import sys
    from pathlib import Path
    for name in sys.argv[1:]:
        try:
            saved = json.loads(Path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            sys.exit(f"{name}: not a saved answers result ({error.__class__.__name__})")
        print(f"\n{saved['model']}, {saved['dataset']}, learn {saved['learn']}, window {saved['context_tokens']} "
              f"({saved['date']}, commit {saved['commit']}{', partial' if saved.get('partial') else ''})\n")
        print(table(saved))
