"""The training set a fine-tune learns from: how this user likes answers, never what they told Engram.

- confirmed hypotheses and standing instructions the user gave ("metric units from now on", "shorter answers") of
  a kind core.finetune.styles recognises become demonstrations: a question and a reply that shows the preference
  (never the sentence stating it), with the same answer ignoring it as the rejected side of a preference pair;
- replies the user rated good become chat examples, and a regenerated reply the user kept (not rated poor) over the
  one it replaced becomes a preference pair (kept = chosen, replaced = rejected);
- the chat has no way to edit a reply, so there are no edits to learn from.
Facts are never trained on: memory puts them in the prompt with attribution and undo, and a fact in the weights
cannot be deleted. A reply that restates something in memory, or drew on a memory the reply rating found used, is
left out (`skipped` says so). Trashed, forgotten, rejected and incognito content never enters: the queries read
only active rows, confirmed hypotheses, and episodes whose metadata does not say incognito.

Probes are held out by item: each style's PROBE situations (other topics) and one in HOLD_OUT_EVERY rated replies
are only scored by the gate, never trained on.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from core.finetune.styles import BARE_CHARS, MAX_INSTRUCTION_CHARS, STANDING_CUES, Demo, Style, \
    standing_instruction, style_of
from core.store.db import Database

HOLD_OUT_EVERY = 4  # with four or more rated replies, every fourth is a probe, not an example
MIN_FACT_CHARS = 3  # a memory's object shorter than this ("NY") is too common a string to look for
_INCOGNITO = "coalesce(json_extract(e.metadata, '$.incognito'), 0) NOT IN (0, 'false')"
_LIVE_EPISODE = f"""e.deleted_at IS NULL AND e.forgotten_at IS NULL AND NOT ({_INCOGNITO})
                    AND (e.session_id IS NULL OR EXISTS (SELECT 1 FROM sessions s
                         WHERE s.id = e.session_id AND s.deleted_at IS NULL))"""


@dataclass(frozen=True)
class Probe:
    """A held-out situation whose reply the adapter should now find likelier: a style's unseen situation (kind
    "preference", item_id a hypothesis or the instruction's episode) or a rated reply held out (kind "reply").
    `rejected`: the same answer ignoring the preference, when known (the gate reports the margin)."""

    question: str
    answer: str
    item_id: int
    kind: str = "preference"
    rejected: str = ""


@dataclass(frozen=True)
class TrainingSet:
    examples: list[dict[str, Any]] = field(default_factory=list)  # mlx-lm chat format: {"messages": [...]}
    pairs: list[dict[str, Any]] = field(default_factory=list)  # {"messages": [...prompt], "chosen", "rejected"}
    probes: list[Probe] = field(default_factory=list)
    memory_ids: list[int] = field(default_factory=list)  # always empty: kept for the adapters' lineage shape
    episode_ids: list[int] = field(default_factory=list)
    hypothesis_ids: list[int] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what was left out, and why

    @property
    def is_empty(self) -> bool:
        return not self.examples

    @property
    def size(self) -> int:
        """What the recipe is chosen from: the examples (each pair's kept reply is one of them)."""
        return len(self.examples)


def build_training_set(db: Database, *, seed: int = 0, system_prompt: str = "") -> TrainingSet:
    out = _Builder(system_prompt, lambda: _fact_strings(db))
    for hypothesis in _confirmed_hypotheses(db):
        out.style(style_of(hypothesis["claim"]), "hypothesis", hypothesis["id"], hypothesis["claim"])
    for episode in _instructions(db):
        out.style(standing_instruction(episode["user_text"]), "episode", episode["id"], episode["user_text"])
    rated = [e for e in _good_replies(db) if out.factless(e)]
    for n, episode in enumerate(rated):
        held_out = len(rated) >= HOLD_OUT_EVERY and n % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1
        out.rated(episode, held_out)
    for episode in _kept_regenerations(db):
        out.regeneration(episode)
    rng = random.Random(seed)
    rng.shuffle(out.examples)
    rng.shuffle(out.pairs)
    return TrainingSet(examples=out.examples, pairs=out.pairs, probes=out.probes, episode_ids=sorted(out.episodes),
                       hypothesis_ids=sorted(out.hypotheses), styles=list(out.seen_styles), skipped=out.skipped)


class _Builder:
    def __init__(self, system_prompt: str, read_facts: Callable[[], list[str]]) -> None:
        self.system_prompt, self.read_facts = system_prompt, read_facts
        self.facts: list[str] | None = None  # read on the first reply to check: most stores have none to check
        self.examples: list[dict[str, Any]] = []
        self.pairs: list[dict[str, Any]] = []
        self.probes: list[Probe] = []
        self.episodes: set[int] = set()
        self.hypotheses: set[int] = set()
        self.seen_styles: dict[str, int] = {}
        self.skipped: list[str] = []

    def style(self, style: Style | None, item_type: str, item_id: int, text: str) -> None:
        if style is None:
            if item_type == "hypothesis":
                self.skipped.append(f"hypothesis {item_id}: no demonstration for this kind of preference yet")
            return
        (self.hypotheses if item_type == "hypothesis" else self.episodes).add(item_id)
        if style.name in self.seen_styles:
            return  # said twice (confirmed and instructed): demonstrated once
        self.seen_styles[style.name] = item_id
        for demo in style.train:
            self.examples.append(self._chat(demo.prompt, demo.reply))
            self.pairs.append(self._pair(demo.prompt, demo.reply, demo.contrast))
        self.probes += [_probe(demo, item_id) for demo in style.probes]

    def factless(self, episode: dict[str, Any]) -> bool:
        if episode["drew_on_memory"] or self._restates_a_fact(episode["assistant_text"]):
            self.skipped.append(f"episode {episode['id']}: the reply restates something in memory")
            return False
        return True

    def rated(self, episode: dict[str, Any], held_out: bool) -> None:
        self.episodes.add(episode["id"])
        if held_out:
            self.probes.append(Probe(episode["user_text"], episode["assistant_text"], episode["id"], "reply"))
        else:
            self.examples.append(self._chat(episode["user_text"], episode["assistant_text"]))

    def regeneration(self, episode: dict[str, Any]) -> None:
        kept, rejected = episode["assistant_text"], episode["rejected"]
        if not self.factless(episode) or self._restates_a_fact(rejected):
            return
        self.episodes.add(episode["id"])
        if episode["rating"] != 1:  # a kept reply rated good is an example already
            self.examples.append(self._chat(episode["user_text"], kept))
        self.pairs.append(self._pair(episode["user_text"], kept, rejected))

    def _restates_a_fact(self, text: str) -> bool:
        if self.facts is None:  # every memory's text: 0.6 s of `engram finetune status` at 100k memories
            self.facts = self.read_facts()
        lowered = text.casefold()
        return any(fact in lowered for fact in self.facts)

    def _prompt(self, user: str) -> list[dict[str, str]]:
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return head + [{"role": "user", "content": user}]

    def _chat(self, user: str, assistant: str) -> dict[str, Any]:
        return {"messages": self._prompt(user) + [{"role": "assistant", "content": assistant}]}

    def _pair(self, user: str, chosen: str, rejected: str) -> dict[str, Any]:
        return {"messages": self._prompt(user), "chosen": chosen, "rejected": rejected}


def _probe(demo: Demo, item_id: int) -> Probe:
    return Probe(demo.prompt, demo.reply, item_id, "preference", demo.contrast)


def _fact_strings(db: Database) -> list[str]:
    """What a reply must not contain to be trained on: every memory's object and statement, trashed or not (a
    trashed fact must not come back through the weights either)."""
    found = set()
    for row in db.query("SELECT statement, object FROM memories"):
        for text in (row["object"], row["statement"]):
            text = (text or "").strip().rstrip(".!?").casefold()
            if len(text) >= MIN_FACT_CHARS:
                found.add(text)
    return sorted(found)


def _confirmed_hypotheses(db: Database) -> list[dict[str, Any]]:
    return db.query("SELECT id, claim FROM hypotheses WHERE status = 'confirmed' ORDER BY id")


def _instructions(db: Database) -> list[dict[str, Any]]:
    """Turns that give a standing instruction. SQL narrows them first (short, with a cue word or very short): the
    Jobs panel and the nightly plan ask every few seconds, and a long store has many turns."""
    cues = " OR ".join(f"e.user_text LIKE '%{cue}%'" for cue in STANDING_CUES)
    rows = db.query(f"""SELECT e.id, e.user_text FROM episodes e WHERE e.speaker = 'user'
                        AND length(e.user_text) <= {MAX_INSTRUCTION_CHARS}
                        AND (length(e.user_text) <= {BARE_CHARS} OR {cues}) AND {_LIVE_EPISODE} ORDER BY e.id""")
    return [r for r in rows if standing_instruction(r["user_text"]) is not None]


def _good_replies(db: Database) -> list[dict[str, Any]]:
    return db.query(
        f"""SELECT e.id, e.user_text, e.assistant_text, e.rating,
                   EXISTS (SELECT 1 FROM reply_memories r WHERE r.episode_id = e.id AND r.useful = 1) AS drew_on_memory
            FROM episodes e WHERE e.rating = 1 AND e.assistant_text != '' AND {_LIVE_EPISODE} ORDER BY e.id""")


def _kept_regenerations(db: Database) -> list[dict[str, Any]]:
    """Replies the user regenerated and kept: the newest one they asked to replace is the rejected side."""
    rows = db.query(
        f"""SELECT e.id, e.user_text, e.assistant_text, e.rating, e.metadata,
                   EXISTS (SELECT 1 FROM reply_memories r WHERE r.episode_id = e.id AND r.useful = 1) AS drew_on_memory
            FROM episodes e WHERE coalesce(e.rating, 0) != -1 AND e.assistant_text != ''
              AND json_array_length(e.metadata, '$.rejected_replies') > 0 AND {_LIVE_EPISODE} ORDER BY e.id""")
    out = []
    for row in rows:
        rejected = json.loads(row["metadata"]).get("rejected_replies") or []
        if rejected and isinstance(rejected[-1], str) and rejected[-1].strip() != row["assistant_text"].strip():
            out.append({**row, "rejected": rejected[-1]})
    return out
