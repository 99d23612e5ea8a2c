"""Real conversational text for the large benches: distinct turns recombined from LoCoMo's and BEAM's own sentences.

The rule, deterministic (RULES below is part of every cache key):
1. The sentence pool: every LoCoMo dev turn (5 conversations, both speakers) and every BEAM dev message (10
   conversations, user and assistant; the ` ->-> b,k` generation marker stripped), split into sentences by the
   product's own splitter (core.memory.sentences.sentence_spans). A sentence is kept when it has 4–40 words, is
   mostly letters (no code, tables or list markup: `{}=<>|#*` and backticks excluded) and was not seen before.
2. A turn: two or three sentences from the pool, each from a different source message, in the drawn order, joined
   by a space; drawn with random.Random(seed). A turn already made is drawn again, so every turn is distinct.
Queries are the data's own questions (LoCoMo's QA and BEAM's probing questions), none of them a stored row.
No vector is copied or jittered: every stored row's vector is the product embedder's vector of its own text.
"""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RULES = "pool-v1/4-40w/2-3s/distinct-sources"
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
_MARKUP = re.compile(r"[{}=<>|#*`\\]")


def data_folder(folder: Path | None = None) -> Path:
    """The shared data sets: ../shared/data beside a worktree, or /work/shared/data."""
    for candidate in (folder, DATA, Path("/work/shared/data")):
        if candidate is not None and (candidate / "locomo" / "locomo-dev.json").exists():
            return candidate
    raise FileNotFoundError("LoCoMo/BEAM data not found (expected ../shared/data/locomo and ../shared/data/beam)")


def _messages(data: Path) -> tuple[list[str], list[str]]:
    """Every source message's text, and the LoCoMo speakers' names."""
    texts, names = [], set()
    for sample in json.loads((data / "locomo" / "locomo-dev.json").read_text(encoding="utf-8")):
        talk = sample["conversation"]
        names.update((talk["speaker_a"], talk["speaker_b"]))
        for key, turns in talk.items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [t["text"] for t in turns]
    for chat in sorted((data / "beam").glob("*/chat.json"), key=lambda p: int(p.parent.name)):
        for batch in json.loads(chat.read_text(encoding="utf-8")):
            for turn in batch["turns"]:
                texts += [_MARKER.sub("", message["content"]) for message in turn]
    return texts, sorted(names)


@lru_cache(maxsize=2)
def sentence_pool(data: Path | None = None) -> tuple[tuple[tuple[int, str], ...], tuple[str, ...]]:
    """((source message index, sentence), ...) in data order, and the speakers' names."""
    from core.memory.sentences import sentence_spans
    texts, names = _messages(data_folder(data))
    seen: set[str] = set()
    pool = []
    for source, text in enumerate(texts):
        for start, end in sentence_spans(text):
            sentence = " ".join(text[start:end].split())
            words = len(sentence.split())
            if 4 <= words <= 40 and sentence not in seen and not _MARKUP.search(sentence) and _letters(sentence):
                seen.add(sentence)
                pool.append((source, sentence))
    return tuple(pool), tuple(names)


def _letters(sentence: str) -> bool:
    return sum(c.isalpha() or c.isspace() for c in sentence) >= 0.85 * len(sentence)


def turns(count: int, *, seed: int = 41, data: Path | None = None) -> list[tuple[int, ...]]:
    """`count` distinct turns by the rule in the module's docstring, each as its sentences' places in the pool;
    the same list for the same arguments. text() joins one."""
    pool, _names = sentence_pool(data)
    rng = random.Random(seed)
    made: set[tuple[int, ...]] = set()
    out: list[tuple[int, ...]] = []
    while len(out) < count:
        picked = _distinct_sources(pool, rng, rng.choice((2, 3)))
        if picked not in made:
            made.add(picked)
            out.append(picked)
    return out


def text(parts: tuple[int, ...], data: Path | None = None) -> str:
    pool, _names = sentence_pool(data)
    return " ".join(pool[i][1] for i in parts)


def _distinct_sources(pool, rng: random.Random, size: int) -> tuple[int, ...]:
    picked: dict[int, int] = {}
    while len(picked) < size:
        place = rng.randrange(len(pool))
        picked.setdefault(pool[place][0], place)
    return tuple(picked.values())


def questions(count: int, *, seed: int = 43, data: Path | None = None) -> list[str]:
    """`count` of the data's own questions (LoCoMo QA, BEAM probing questions), shuffled by `seed`."""
    folder = data_folder(data)
    asked = [qa["question"] for sample in json.loads((folder / "locomo" / "locomo-dev.json").read_text("utf-8"))
             for qa in sample["qa"] if qa.get("question")]
    for probe in sorted((folder / "beam").glob("*/probing_questions.json")):
        for items in json.loads(probe.read_text(encoding="utf-8")).values():
            asked += [item["question"] for item in items if item.get("question")]
    asked = sorted(set(asked))
    random.Random(seed).shuffle(asked)
    return asked[:count]
