"""LoCoMo and BEAM as bench/answers.py reads them: chat turns to feed a store, and probes to ask it.

A LoCoMo conversation is between two people; each of its turns becomes one chat message from the user, written as
"Name: words" (a chat log pasted line by line), with no reply, at its session's date plus a minute a turn. A BEAM
conversation is a user talking with an assistant: each user message and the assistant's reply that follows become
one chat turn, at its batch's time anchor plus a minute a turn; the generation marker " ->-> b,k" is stripped.
The files' observations and summaries (LoCoMo) and reference answers other than the scored ones are never read.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench.locomo import CATEGORIES, normalise_evidence, normalise_id, session_time

MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
LOCOMO_SHORT = " Answer in a short phrase."  # LoCoMo's own QA prompt asks for a short answer; F1 punishes more
ABSTAIN_BEAM, UPDATE_BEAM = "abstention", "knowledge_update"


@dataclass(frozen=True)
class ChatTurn:
    user: str
    reply: str
    at: float
    session: int
    ids: tuple[str, ...]  # the data set's ids of the messages this turn holds (evidence is named by them)


@dataclass(frozen=True)
class Probe:
    id: str
    question: str  # as asked, word for word (LoCoMo: with LOCOMO_SHORT)
    category: str
    evidence: frozenset[str] = frozenset()
    answer: str = ""  # the data set's answer (LoCoMo: original gold; BEAM: reference answer, not scored)
    corrected: str | None = None  # LoCoMo: the audit's corrected answer, where it changes what is scored
    corrected_evidence: frozenset[str] | None = None
    rubric: tuple[str, ...] = ()  # BEAM: what is scored
    abstain: bool = False  # the right answer is that the conversation does not say
    update: bool = False  # the right answer is the newest value


@dataclass(frozen=True)
class Dialogue:
    dataset: str
    name: str
    turns: tuple[ChatTurn, ...]
    probes: tuple[Probe, ...]
    source_text: str = field(default="", repr=False)  # what the store cache key hashes

    @property
    def asked_at(self) -> float:
        """Questions are asked a day after the last turn."""
        return self.turns[-1].at + 86400.0


# ---- LoCoMo ---------------------------------------------------------------------------------------------

def load_locomo(path: Path, audit_path: Path | None) -> list[Dialogue]:
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    audit = _audit(audit_path)
    return [_locomo_dialogue(sample, index, audit) for index, sample in enumerate(samples)]


def _audit(path: Path | None) -> dict[str, dict]:
    """question_id ("locomo_<c>_qa<q>", q 0-based) → the audit's entry; WRONG_CITATION keeps the old answer."""
    if path is None or not Path(path).is_file():
        return {}
    return {entry["question_id"]: entry for entry in json.loads(Path(path).read_text(encoding="utf-8"))}


def _locomo_dialogue(sample: dict, index: int, audit: dict[str, dict]) -> Dialogue:
    conv = sample["conversation"]
    turns: list[ChatTurn] = []
    sessions = sorted(int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    for number in sessions:
        start = session_time(conv[f"session_{number}_date_time"])
        for position, turn in enumerate(conv[f"session_{number}"]):
            text = turn["text"] + (f" [shares an image: {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            dia_id = normalise_id(turn["dia_id"]) or turn["dia_id"]
            turns.append(ChatTurn(f"{turn['speaker']}: {text}", "", start + 60.0 * position, number, (dia_id,)))
    probes = [_locomo_probe(q, f"locomo_{index}_qa{n}", audit.get(f"locomo_{index}_qa{n}"))
              for n, q in enumerate(sample["qa"])]
    name = str(sample.get("sample_id", f"conversation-{index}"))
    return Dialogue("locomo", name, tuple(turns), tuple(probes), json.dumps(conv, sort_keys=True))


def _locomo_probe(qa: dict, qid: str, fix: dict | None) -> Probe:
    category = int(qa["category"])
    answer = str(qa.get("answer", qa.get("adversarial_answer", "")))
    corrected, corrected_evidence = None, None
    if fix is not None:
        if fix.get("error_type") != "WRONG_CITATION":
            corrected = str(fix.get("correct_answer", answer))
        corrected_evidence = normalise_evidence(fix.get("correct_evidence") or [])
    return Probe(qid, qa["question"] + LOCOMO_SHORT, CATEGORIES.get(category, str(category)),
                 normalise_evidence(qa.get("evidence", [])), answer, corrected, corrected_evidence,
                 abstain=category == 5)


# ---- BEAM -----------------------------------------------------------------------------------------------

TRUNCATED_AT = {"5": 231, "7": 253, "10": 285}  # the authors' chat_trunecated.json cuts (README): ids above dropped


def load_beam(folder: Path) -> list[Dialogue]:
    names = sorted((p.name for p in Path(folder).iterdir() if (p / "chat.json").is_file()), key=int)
    return [_beam_dialogue(Path(folder) / name, name) for name in names]


def anchor_time(text: str) -> float:
    """'March-15-2024' as a UTC timestamp (noon)."""
    parsed = datetime.strptime(text.strip(), "%B-%d-%Y").replace(hour=12, tzinfo=timezone.utc)
    return parsed.timestamp()


def _beam_dialogue(folder: Path, name: str) -> Dialogue:
    raw = (folder / "chat.json").read_text(encoding="utf-8")
    cut = TRUNCATED_AT.get(name, 10 ** 9)
    turns: list[ChatTurn] = []
    at = 0.0
    for batch in json.loads(raw):
        messages = [m for turn in batch["turns"] for m in turn if int(m["id"]) <= cut]
        for i, message in enumerate(messages):
            if message.get("time_anchor"):
                at = anchor_time(message["time_anchor"])
            if message["role"] != "user":
                continue
            reply = messages[i + 1] if i + 1 < len(messages) and messages[i + 1]["role"] == "assistant" else None
            ids = (str(message["id"]),) + ((str(reply["id"]),) if reply else ())
            at += 60.0
            turns.append(ChatTurn(MARKER.sub("", message["content"]).strip(), reply["content"] if reply else "",
                                  at, int(batch["batch_number"]), ids))
    questions = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
    probes = [_beam_probe(q, f"beam_{name}_{category}_{n}", category)
              for category, items in questions.items() for n, q in enumerate(items)]
    return Dialogue("beam", f"beam-{name}", tuple(turns), tuple(probes), raw)


def _beam_probe(q: dict, qid: str, category: str) -> Probe:
    sources = list(_ids(q.get("source_chat_ids") or []))
    answer = q.get("answer") or q.get("ideal_answer") or q.get("ideal_response") or q.get("expected_compliance") or ""
    return Probe(qid, q["question"], category, frozenset(sources), str(answer),
                 rubric=tuple(str(r) for r in q.get("rubric", [])), abstain=category == ABSTAIN_BEAM,
                 update=category == UPDATE_BEAM)


def _ids(value: object):
    """Message ids from a list, an object of lists, or lists of lists (the files use all three)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _ids(item)
    elif isinstance(value, (int, str)) and str(value).strip().isdigit():
        yield str(int(value))


# ---- choosing a subset ----------------------------------------------------------------------------------

def spread(probes: tuple[Probe, ...], limit: int, turn: int = 0) -> list[Probe]:
    """At most `limit` probes taken round-robin over the categories in their order of first appearance, starting
    `turn` categories further on (the n-th conversation starts at its n-th category, so a few questions from each
    of several conversations still ask every kind); 0 or less: all of them."""
    if limit <= 0 or limit >= len(probes):
        return list(probes)
    grouped: dict[str, list[Probe]] = defaultdict(list)
    for probe in probes:
        grouped[probe.category].append(probe)
    names = list(grouped)
    start = turn % len(names)
    by_category = {name: grouped[name] for name in names[start:] + names[:start]}
    chosen: list[Probe] = []
    depth = 0
    while len(chosen) < limit:
        for items in by_category.values():
            if depth < len(items) and len(chosen) < limit:
                chosen.append(items[depth])
        depth += 1
    return chosen
