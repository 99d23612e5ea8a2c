"""What a recalled row says to the user: its text, and one line on why it was recalled (core.memory.recall)."""
from __future__ import annotations

from typing import Any

from core.memory.query import WORD, QueryAnalysis, stem
from core.memory.recall_sources import Candidate
from core.memory.time_query import TimeWindow

QUOTED_CHARS = 80  # a matching sentence is quoted up to this long: the reason stays one readable line
# Which query words a hit shares is read from its first this many characters: an imported turn can hold 200,000,
# and reading all of a long hit's words cost more than the rest of its recall (BM25 has matched the words anyway).
SCANNED_CHARS = 20_000


def hit_text(candidate: Candidate) -> str:
    row = candidate.row
    if candidate.kind == "memory":
        return row["text"]
    return turn_text(row["speaker"], row["user_text"], row["assistant_text"])


def turn_text(speaker: str, user_text: str, assistant_text: str = "") -> str:
    """A conversation turn as recall shows it: who said what, then the reply if there was one."""
    return f"{speaker}: {user_text}" + (f"\nassistant: {assistant_text}" if assistant_text else "")


def explain(scored: Any, analysis: QueryAnalysis, text: str, window: TimeWindow | None = None,
            sentence: str | None = None) -> str:
    """One line a user can read: which words matched, how close in meaning (and through which sentence of a turn,
    when one of them rather than the whole turn was), what lent it context. `scored`: recall's _Scored."""
    parts, b = [], scored.breakdown
    matched = _matched_terms(analysis, text)
    if matched and scored.candidate.bm25 is not None:
        parts.append("shares the words " + ", ".join(f"'{t}'" for t in matched))
    if b["similarity"] > 0:
        through = f' through the sentence "{quoted(sentence)}"' if sentence and sentence.strip() else ""
        parts.append(f"close in meaning ({1.0 - (scored.candidate.distance or 0.0):.2f} cosine){through}")
    if b["neighbour"] > 0 and scored.links["neighbour_id"]:
        relation = "the reply to matching question" if scored.links.get("replies") else "next to matching turn"
        parts.append(f"{relation} #{scored.links['neighbour_id']}")
    if b["graph"] > 0:
        parts.append(f"linked to memory #{scored.links['graph_from']} (edge {scored.links['edge']:.2f})")
    if b.get("speaker", 0) > 0:
        parts.append(f"said by {scored.candidate.row['speaker']}, whom the query names")
    if b.get("time", 0) > 0 and window is not None:
        parts.append(f"from the time the query names ('{window.phrase}')")
    if b["session"] > 0 and not parts:
        parts.append("from a conversation that matched")
    if b["recency"] > 0.05:
        parts.append("recent")
    if b["importance"] > 0.5:
        parts.append("important")
    if abs(b.get("learnt", 1.0) - 1.0) >= 0.05:
        parts.append(f"×{b['learnt']:.2f} learnt from your vetoes, pins and thumbs")
    status = _status(scored.candidate.row)
    if status:
        parts.append(status)
    return "; ".join(parts) or "weak match"


def quoted(sentence: str, limit: int = QUOTED_CHARS) -> str:
    """The sentence on one line, cut at a word with "…" past `limit` characters (a pasted page's last sentence can
    be most of it: only its head is read)."""
    head = sentence[:limit * 8]
    line = " ".join(head.split())
    if len(line) <= limit and len(head) == len(sentence):
        return line
    cut = line[:limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def _matched_terms(analysis: QueryAnalysis, text: str) -> list[str]:
    """The query's terms the text holds, as written or under the crude stem (query.stem) on either side. Only the
    text's words that could match are stemmed: a stem keeps its word's first three letters."""
    if not analysis.terms:
        return []
    words = set(WORD.findall(text[:SCANNED_CHARS].lower()))
    heads = {form[:3] for term in analysis.terms for form in (term, stem(term))}
    words.update(stem(word) for word in [w for w in words if w[:3] in heads])
    return [t for t in analysis.terms if t in words or stem(t) in words]


def _status(row: dict) -> str:
    for column, label in (("deleted_at", "in the trash"), ("forgotten_at", "forgotten"),
                          ("invalidated_at", "no longer holds")):
        if row.get(column) is not None:
            return f"from history: {label}"
    return ""
