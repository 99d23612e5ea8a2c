"""Context assembly within a token budget (R-Memory's ordering, KenLM's session instructions).

The system message holds, in this order: the identity, today's date, the critical facts matched to the
request's intent, this session's behavioural instructions, the confirmed profile, and the recalled memories
with their ids. Then this session's latest turns, then the user's message. When the budget is short, pieces are
admitted by priority — critical facts, instructions, profile, recalled memories best first, then the newest
turns — so a critical fact is the last thing ever cut. Everything remembered is quoted as data
(core.prompts.answer).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from core.memory import excerpt
from core.memory.quoted_dates import dated_text, said_day
from core.prompts import answer
from core.protocols import ChatMessage

TokenCounter = Callable[[str], int]
SECTION_OVERHEAD_TOKENS = 24  # a heading and its fence lines


@dataclass(frozen=True)
class ContextItem:
    """A remembered item offered to the context: a memory (the chips) or an earlier conversation turn."""
    kind: str  # "memory" or "episode"
    id: int
    text: str
    why: str
    score: float = 0.0
    critical: bool = False
    label: str = ""  # a critical fact's relation
    at: float | None = None  # when an earlier turn was said: quoted with its day, its "yesterday" resolved
    sentence: str = ""  # the sentence of a turn recall matched: a long turn is quoted around it (core.memory.excerpt)

    def line(self) -> str:
        if self.kind == "memory":
            return answer.NoteLine(self.id, self.text, self.label).render()
        text = " ".join(self.text.split())
        return f"[e{self.id}] {text if self.at is None else dated_text(text, self.at)}"

    def day(self) -> str | None:
        """The day a quoted turn was said, shown as its group's heading; None for a memory or an undated turn."""
        return said_day(self.at) if self.kind == "episode" and self.at is not None else None


def note_lines(items: Sequence[ContextItem]) -> list[str]:
    """Each item's line, a quoted turn under a heading naming the day it was said (once for neighbours of the same
    day). The day stands on its own line: quoted as '[e1, said 28 November 2026] user: …' (or with the day after
    the text) greedy SmolLM2 began its replies by copying the whole notes block."""
    lines: list[str] = []
    shown = None
    for item in items:
        day = item.day()
        if day is not None and day != shown:
            lines.append(answer.said_on(day))
        shown = day
        lines.append(item.line())
    return lines


def in_time_order(items: Sequence[ContextItem]) -> list[ContextItem]:
    """The notes as the model reads them: remembered facts first (best first: what is known now), then the quoted
    turns oldest first, so the newest word on a thing stands last, nearest the question. Recall admits them best
    first; read in that order, a value that changed stood wherever its relevance put it, the old one often first
    (bench/answers.py: BEAM's knowledge updates, LoCoMo's "when" questions read across days)."""
    facts = [i for i in items if i.kind != "episode" or i.at is None]
    turns = sorted((i for i in items if i.kind == "episode" and i.at is not None), key=lambda i: (i.at, i.id))
    return facts + turns


@dataclass(frozen=True)
class ContextParts:
    user_text: str
    today: str
    critical: Sequence[ContextItem] = ()
    recalled: Sequence[ContextItem] = ()  # best first
    instructions: str = ""
    own_instructions: str = ""  # what the user wrote for this conversation ("instructions", as LM Studio's)
    profile: Sequence[str] = ()
    history: Sequence[tuple[str, str]] = ()  # (user, assistant) of this session, oldest first
    memory_read: bool = False  # the memory was read for this turn: if nothing of it fits, the prompt says so


@dataclass(frozen=True)
class AssembledContext:
    messages: list[ChatMessage]
    included: list[ContextItem]  # in context order, critical first
    left_out: list[ContextItem] = field(default_factory=list)  # did not fit the budget
    tokens: int = 0  # the estimate the budget was checked against


@dataclass
class _Budget:
    left: int
    count: TokenCounter

    def take(self, text: str, extra: int = 0) -> bool:
        cost = self.count(text) + extra
        if cost > self.left:
            return False
        self.left -= cost
        return True


def assemble(parts: ContextParts, count_tokens: TokenCounter, budget_tokens: int) -> AssembledContext:
    """The messages for one answer, the items that made it in, and those that did not fit. The pieces are counted
    one by one; the messages as written are counted again, and if they run over (joins, headings), assembled
    again in a budget short by that much, so the engine never refuses what was assembled for its window."""
    built = _assemble(parts, count_tokens, budget_tokens)
    for _ in range(3):
        if built.tokens + max(RECOUNT_FLOOR, int(built.tokens * RECOUNT_SHARE)) <= budget_tokens:
            break  # far inside its budget: the joins cannot take it over (a turn's prompt, most often)
        over = written_tokens(built.messages, count_tokens) - budget_tokens
        if over <= 0:
            break
        built = _assemble(parts, count_tokens, built.tokens - over)
    return built


MESSAGE_TOKENS = 5  # a chat template's start, role and end marks around each message
# The messages as written differ from their pieces' counts by joins and headings (28 tokens in 1,916 on BEAM), so a
# prompt whose pieces leave this much of the budget free is not counted again: counting the whole system prompt
# anew was ~3.5 ms of a turn's ~60 at 100k memories (SmolLM2's tokenizer, bench/notes.md 2026-11-29).
RECOUNT_FLOOR, RECOUNT_SHARE = 64, 0.25


def written_tokens(messages: Sequence[ChatMessage], count_tokens: TokenCounter) -> int:
    return sum(count_tokens(m.content) + MESSAGE_TOKENS for m in messages)


def _assemble(parts: ContextParts, count_tokens: TokenCounter, budget_tokens: int) -> AssembledContext:
    budget = _Budget(budget_tokens, count_tokens)
    budget.left -= (count_tokens(answer.IDENTITY) + count_tokens(parts.user_text) + SECTION_OVERHEAD_TOKENS
                    + count_tokens(f"Today is {parts.today}.")
                    + (count_tokens(answer.NOTHING_RECALLED) if parts.memory_read else 0))
    own = parts.own_instructions.strip()
    budget.left -= count_tokens(own) if own else 0  # the user's own words for this conversation always go in
    critical, cut_critical = _admit(parts.critical, budget, count_tokens(answer.critical_section([])))
    instructions = parts.instructions if parts.instructions and budget.take(parts.instructions,
                                                                            SECTION_OVERHEAD_TOKENS) else ""
    profile = [c for c in parts.profile if budget.take(c, 2)]
    recalled, cut_recalled = _admit(parts.recalled, budget, count_tokens(answer.memory_section([])))
    history = _admit_history(parts.history, budget)
    sections = [answer.own_instructions_section(own) if own else "",
                answer.critical_section([i.line() for i in critical]) if critical else "",
                answer.style_section(instructions) if instructions else "",
                answer.profile_section(profile) if profile else "",
                answer.memory_section(note_lines(in_time_order(recalled))) if recalled else "",
                answer.NOTHING_RECALLED if parts.memory_read and not recalled else ""]
    messages = [ChatMessage("system", answer.system_prompt(sections, parts.today))]
    for user, assistant in history:
        messages += [ChatMessage("user", user), ChatMessage("assistant", assistant)]
    messages.append(ChatMessage("user", parts.user_text))
    return AssembledContext(messages, critical + recalled, cut_critical + cut_recalled,
                            budget_tokens - budget.left)


def _admit(items: Sequence[ContextItem], budget: _Budget,
           section: int = SECTION_OVERHEAD_TOKENS) -> tuple[list[ContextItem], list[ContextItem]]:
    """The items that fit, best first; the first one kept pays for its section's heading, fences and closing line
    (`section` tokens: the memory section's run to ~100, past the old flat 24, and a prompt filled to the last
    token by excerpts went 28 tokens over the window: the engine refused it, "shorten the message")."""
    kept: list[ContextItem] = []
    cut: list[ContextItem] = []
    share = max(budget.left // max(len(items), 1), excerpt.FLOOR_TOKENS)  # each item's fair part of what is left
    for item in items:
        item = _within(item, share, budget.count)
        day = item.day()
        text = item.line() if day is None else f"{answer.said_on(day)}\n{item.line()}"  # its heading, at most
        (kept if budget.take(text, 2 + (section if not kept else 0)) else cut).append(item)
    return kept, cut


def _within(item: ContextItem, share: int, count: TokenCounter) -> ContextItem:
    """A recalled turn longer than its share of the budget, quoted around the sentence recall matched in it (a
    whole 600-word turn took a 2,048-token window's room for three others); other items as they are."""
    if not item.sentence or count(item.text) <= share:
        return item
    return replace(item, text=excerpt.around(item.text, item.sentence, int(share * excerpt.WORDS_PER_TOKEN)))


def _admit_history(history: Sequence[tuple[str, str]], budget: _Budget) -> list[tuple[str, str]]:
    """The newest turns that fit, returned oldest first."""
    kept: list[tuple[str, str]] = []
    for user, assistant in reversed(history):
        if not budget.take(user + "\n" + assistant, 8):
            break
        kept.append((user, assistant))
    return kept[::-1]


class CountedTokens:
    """A chat model's token counts, remembered for the texts seen most recently.

    Each turn counts the identity, the history's turns and the recalled notes again, nearly all of them counted on
    the turns before (a tokenizer's encode: ~28 µs a line for SmolLM2's, twenty-odd lines a turn). The count of a
    text never changes for one model; an Assistant holds one of these per model."""

    def __init__(self, count: TokenCounter, size: int = 2048) -> None:
        self._count, self._size = count, size
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        found = self._known.pop(text, None)
        if found is None:
            found = self._count(text)
            if len(self._known) >= self._size:
                del self._known[next(iter(self._known))]  # the least recently used: dicts keep their order
        self._known[text] = found
        return found
