"""Untrusted text reaches the model as plain text, never as control tokens.

A memory, a recalled turn, a pasted message or the model's own earlier reply may hold the literal text of a
chat-template marker (`<|im_start|>`, `<|eot_id|>`, `<start_of_turn>`, `[INST]`). Rendered as is, the tokenizer
turns it into the real control token and the prompt gains a turn nobody wrote. Each marker of the loaded tokenizer
(its special and added tokens, and the markers its chat template writes) is broken with an invisible word joiner,
so the text stays readable and no marker can be formed from it.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from models.template_deadline import within_deadline

WORD_JOINER = "\u2060"  # invisible, and part of no tokenizer's marker
MIN_MARKER = 3  # shorter added tokens (single symbols) are ordinary text
# Marker-like text inside a chat template's string literals: '<start_of_turn>', '[INST] ', '<|header|>'.
_STRING_LITERAL = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'" + r'|"([^"\\]*(?:\\.[^"\\]*)*)"')
_TEMPLATE_MARKER = re.compile(r"<[^\s'\"<>]{1,40}>|\[/?[A-Z_]{2,20}\]")
_MARKUP = re.compile(r"^(<[^\s]+>|\[[^\s\]]+\])$")


def control_markers(tokenizer: Any) -> tuple[str, ...]:
    """Every string that the tokenizer or its chat template treats as a control marker, longest first."""
    found: set[str] = set(_special_tokens(tokenizer))
    for token, special in _added_tokens(tokenizer):
        if special or _MARKUP.match(token):
            found.add(token)
    template = _chat_template(tokenizer)
    if template:
        for single, double in _STRING_LITERAL.findall(template):
            found.update(_TEMPLATE_MARKER.findall(single or double))
    markers = {m for m in found if len(m) >= MIN_MARKER and not any(c.isspace() for c in m)}
    return tuple(sorted(markers, key=lambda m: (-len(m), m)))


def neutralise(text: str, markers: Sequence[str]) -> str:
    """`text` with every marker broken after its first character; the words read the same."""
    if not text or not markers:
        return text
    for _ in range(4):  # one pass suffices; the loop guards against markers nested in one another
        changed = False
        for marker in markers:
            if marker in text:
                text = text.replace(marker, marker[0] + WORD_JOINER + marker[1:])
                changed = True
        if not changed:
            break
    return text


def render_prompt(tokenizer: Any, messages: Iterable[Mapping[str, str]], markers: Sequence[str]) -> list[int]:
    """The chat-templated prompt ids, with every message's content neutralised first.

    Thinking is off (Qwen3's template then closes an empty <think> block itself): chat and extraction want the
    answer, and a reasoning block would cost a weak machine minutes.
    """
    safe = [{"role": m["role"], "content": neutralise(_earlier_reply(m), markers)} for m in normalise_roles(messages)]
    try:
        rendered = within_deadline(lambda: tokenizer.apply_chat_template(safe, add_generation_prompt=True,
                                                                         enable_thinking=False))
    except Exception as exc:  # jinja2's TemplateError, the template's own raise_exception, TemplateTooSlow
        from core.errors import ModelError
        raise ModelError(f"This model's chat template refused the conversation: {exc}") from exc
    if isinstance(rendered, Mapping):  # transformers 5 returns an encoding unless mlx-lm's wrapper unwraps it
        rendered = rendered["input_ids"]
    return list(rendered)


def _earlier_reply(message: Mapping[str, str]) -> str:
    # A reasoning block in an earlier reply is not part of the conversation (Qwen3's template drops it too).
    return strip_think(message["content"]) if message["role"] == "assistant" else message["content"]


def normalise_roles(messages: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """One leading system message, then turns whose roles alternate — what every family's template accepts.

    Gemma 3 has no system role (its template folds a leading one into the first user turn) and refuses two
    user turns in a row; Llama and Qwen read only a leading system message as the system prompt.
    """
    system = [m["content"] for m in messages if m["role"] == "system"]
    merged: list[dict[str, str]] = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    for message in messages:
        if message["role"] == "system":
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + "\n\n" + message["content"]}
        else:
            merged.append({"role": message["role"], "content": message["content"]})
    return merged


class ThinkFilter:
    """Drops <think>…</think> blocks from streamed text, across chunk boundaries (Qwen3 may still reason).

    feed() returns what can be shown now; a tail that might start a tag waits for the next chunk; finish()
    returns what is left (an unclosed block is dropped: it was never an answer).
    """
    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.inside = False
        self._pending = ""
        self._after_block = False  # the blank lines after </think> are not part of the answer

    def feed(self, text: str) -> str:
        buffer, shown = self._pending + text, []
        self._pending = ""
        while buffer:
            tag = self.CLOSE if self.inside else self.OPEN
            index = buffer.find(tag)
            if index < 0:
                keep = _partial_tag_length(buffer, tag)
                self._pending = buffer[len(buffer) - keep:] if keep else ""
                if not self.inside:
                    shown.append(buffer[: len(buffer) - keep])
                break
            if not self.inside:
                shown.append(buffer[:index])
            self.inside, self._after_block = not self.inside, self.inside
            buffer = buffer[index + len(tag):]
        return self._trim("".join(shown))

    def finish(self) -> str:
        rest, self._pending = ("" if self.inside else self._pending), ""
        return self._trim(rest)

    def _trim(self, text: str) -> str:
        if self._after_block and text:
            text = text.lstrip()
            self._after_block = not text
        return text


def strip_think(text: str) -> str:
    """`text` without its <think>…</think> blocks."""
    keeper = ThinkFilter()
    return keeper.feed(text) + keeper.finish()


def _partial_tag_length(text: str, tag: str) -> int:
    """How many trailing characters of `text` could be the start of `tag`."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0


def control_ids(tokenizer: Any) -> set[int]:
    """The ids of the tokenizer's special and added tokens (what a prompt must hold only where the template puts it)."""
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i in decoder)
    return ids


def _special_tokens(tokenizer: Any) -> list[str]:
    tokens = list(getattr(tokenizer, "all_special_tokens", []) or [])
    extra = getattr(tokenizer, "additional_special_tokens", None) or []
    return [str(t) for t in tokens + list(extra)]


def _added_tokens(tokenizer: Any) -> list[tuple[str, bool]]:
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return [(str(getattr(t, "content", t)), bool(getattr(t, "special", False))) for t in decoder.values()]


def _chat_template(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates
        return "\n".join(str(t) for t in template.values())
    return template if isinstance(template, str) else ""
