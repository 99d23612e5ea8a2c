"""LoCoMo evidence retrieval: `python -m bench.locomo --data PATH [--k 5,10,25,50] [--json]`.

Each conversation goes into a fresh Engram store, every turn an episode (the session's date as its time,
the speaker as its speaker, the LoCoMo dia_id as metadata). Each question is answered by Engram's recall
(episodes only: with no chat model there is no extraction), and in the same run by two baselines over the
same turns: BM25 alone (k1 1.2, b 0.75) and dense MiniLM cosine alone. recall@k of a question is the share of
its evidence turns among the top k, averaged per category and overall, as ../shared/data/locomo/README.md
defines it. The file's observations and summaries are never read.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import load_average, stamp  # noqa: E402
from core.memory.index import index_episodes  # noqa: E402
from core.memory.recall import recall  # noqa: E402
from core.store import vectors  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.sessions import create_session  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RETRIEVERS = ("engram", "bm25", "dense")
STOP_WORDS = frozenset("a an the and or of to in on at for with is are was were be been it this that i you he she "
                       "they we my your his her their our me do did does what when where who how which".split())
TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # the turn's words, with its shared image's caption
    session: int
    time: float


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]


# ---- reading the LoCoMo format (conversation and qa only) ----

def normalise_id(raw: str) -> str | None:
    """'D:11:26' → 'D11:26', 'D30:05' → 'D30:5'; None for something that is no dialogue id."""
    match = re.fullmatch(r"D:?(\d+):(\d+)", raw.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def normalise_evidence(evidence: list[str]) -> frozenset[str]:
    ids = (normalise_id(part) for item in evidence for part in re.split(r"[;,\s]+", str(item)) if part)
    return frozenset(i for i in ids if i)


def session_time(text: str) -> float:
    """'1:56 pm on 8 May, 2023' as a UTC timestamp."""
    parsed = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return parsed.replace(tzinfo=timezone.utc).timestamp()


def load(path: Path) -> list[Conversation]:
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    return [_conversation(sample, index) for index, sample in enumerate(samples)]


def _conversation(sample: dict, index: int) -> Conversation:
    conv = sample["conversation"]
    turns: list[Turn] = []
    sessions = sorted(int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    for number in sessions:
        start = session_time(conv[f"session_{number}_date_time"])
        for position, turn in enumerate(conv[f"session_{number}"]):
            dia_id = normalise_id(turn["dia_id"]) or turn["dia_id"]
            text = turn["text"] + (f" [shares an image: {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            turns.append(Turn(dia_id, turn["speaker"], text, number, start + 60.0 * position))
    questions = [Question(q["question"], int(q["category"]), normalise_evidence(q.get("evidence", [])))
                 for q in sample["qa"]]
    return Conversation(str(sample.get("sample_id", f"conversation-{index}")), turns,
                        [q for q in questions if q.evidence])


# ---- scoring ----

def recall_at(retrieved: list[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(retrieved[:k])) / len(evidence)


def summarise(rows: list[tuple[int, str, list[str], frozenset[str]]], ks: list[int]) -> dict:
    """rows: (category, retriever, ranked ids, evidence) → {retriever: {overall, per category}} of mean recall@k."""
    sums: dict = defaultdict(lambda: defaultdict(lambda: np.zeros(len(ks))))
    counts: Counter = Counter()
    for category, retriever, ranked, evidence in rows:
        scores = np.array([recall_at(ranked, evidence, k) for k in ks])
        sums[retriever]["overall"] += scores
        sums[retriever][CATEGORIES.get(category, str(category))] += scores
        counts[(retriever, "overall")] += 1
        counts[(retriever, CATEGORIES.get(category, str(category)))] += 1
    return {retriever: {group: {f"R@{k}": round(float(v / counts[(retriever, group)]), 4) for k, v in zip(ks, total)}
                        for group, total in groups.items()} for retriever, groups in sums.items()}


# ---- the three retrievers ----

def turn_string(turn: Turn) -> str:
    """How the LoCoMo repository embeds a turn, used for both baselines."""
    return f'{turn.speaker} said, "{turn.text}"'


def tokens(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOP_WORDS]


class BM25:
    """Plain Okapi BM25 over the turns (the baseline: no stemming, no fusion)."""

    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokens(d)) for d in documents]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.k1, self.b, self.average = k1, b, max(float(self.lengths.mean()), 1.0) if self.docs else 1.0
        frequency = Counter(term for doc in self.docs for term in doc)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}

    def rank(self, query: str) -> list[int]:
        scores = np.zeros(len(self.docs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / self.average)
        for term in set(tokens(query)):
            if term in self.idf:
                tf = np.array([doc.get(term, 0) for doc in self.docs], dtype=float)
                scores += self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
        return [int(i) for i in np.argsort(-scores, kind="stable")]


def run_conversation(conv: Conversation, embedder, ks: list[int], folder: Path) -> list[tuple]:
    db = open_db(folder / f"{conv.name}.db", clock=lambda: conv.turns[-1].time + 86400.0)
    try:
        episode_to_dia = _ingest(db, embedder, conv)
        documents = [turn_string(t) for t in conv.turns]
        bm25 = BM25(documents)
        turn_vectors = embedder.embed(documents)
        question_vectors = embedder.embed([q.text for q in conv.questions])
        rows = []
        deepest = max(ks)
        for question, vector in zip(conv.questions, question_vectors):
            found = recall(db, embedder, question.text, k=deepest, kinds=("episode",))
            rows.append((question.category, "engram", [episode_to_dia[h.id] for h in found.hits], question.evidence))
            rows.append((question.category, "bm25", [conv.turns[i].dia_id for i in bm25.rank(question.text)],
                         question.evidence))
            dense = np.argsort(-(turn_vectors @ vector), kind="stable")
            rows.append((question.category, "dense", [conv.turns[i].dia_id for i in dense], question.evidence))
        return rows
    finally:
        db.close()


def _ingest(db, embedder, conv: Conversation) -> dict[int, str]:
    sessions: dict[int, int] = {}
    episode_to_dia: dict[int, str] = {}
    with db.transaction():
        for turn in conv.turns:
            if turn.session not in sessions:
                sessions[turn.session] = create_session(db, f"session {turn.session}", created_at=turn.time)
            episode = add_episode(db, turn.text, speaker=turn.speaker, session_id=sessions[turn.session],
                                  created_at=turn.time, metadata={"dia_id": turn.dia_id})
            episode_to_dia[episode] = turn.dia_id
    index_episodes(db, embedder, list(episode_to_dia))
    vectors.upkeep(db)  # as an import ends: a conversation written in bulk (core.store.vector_packs)
    return episode_to_dia


def run(path: Path, ks: list[int], embedder=None, log=print) -> dict:
    if embedder is None:
        from models.embeddings import load_embedder
        embedder = load_embedder(lasting=True)
    header = stamp("locomo")
    started = time.perf_counter()
    conversations = load(path)
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as folder:
        for conv in conversations:
            began = time.perf_counter()
            rows.extend(run_conversation(conv, embedder, ks, Path(folder)))
            log(f"{conv.name}: {len(conv.turns)} turns, {len(conv.questions)} questions, "
                f"{time.perf_counter() - began:.1f} s")
    return {**header, "data": str(path), "conversations": len(conversations),
            "questions": sum(len(c.questions) for c in conversations), "k": ks,
            "load_average_1m_at_end": load_average(),
            "wall_seconds": round(time.perf_counter() - started, 1), "results": summarise(rows, ks)}


def table(result: dict) -> str:
    """A Markdown table: retrievers × (overall and each category) × recall@k."""
    ks = [f"R@{k}" for k in result["k"]]
    lines = ["| retriever | group | " + " | ".join(ks) + " |", "|---|---|" + "---|" * len(ks)]
    for retriever in RETRIEVERS:
        groups = result["results"].get(retriever, {})
        for group in ["overall", *CATEGORIES.values()]:
            if group in groups:
                lines.append(f"| {retriever} | {group} | " + " | ".join(f"{groups[group][k]:.3f}" for k in ks) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json",
                        help="a file in the LoCoMo format (default: the dev split in ../shared beside the repo)")
    parser.add_argument("--k", default="5,10,25,50")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--cache", type=Path, help="keep embeddings in this folder between runs (for iterating)")
    args = parser.parse_args(argv)
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    log = (lambda *_: None) if args.json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    embedder = None
    if args.cache:
        from bench.embed_cache import CachedEmbedder
        from models.embeddings import load_embedder
        embedder = CachedEmbedder(load_embedder(lasting=True), args.cache / "locomo-embeddings.npz")
    result = run(args.data, ks, embedder=embedder, log=log)
    if args.cache:
        embedder.save()
        result["embeddings_cached"] = True
    if not args.json:
        print(table(result), file=sys.stderr)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
