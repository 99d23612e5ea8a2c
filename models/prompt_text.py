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
    """The chat-templated prompt ids, with every message's content neutralised first."""
    safe = [{"role": m["role"], "content": neutralise(m["content"], markers)} for m in messages]
    rendered = tokenizer.apply_chat_template(safe, add_generation_prompt=True, enable_thinking=False)
    if isinstance(rendered, Mapping):  # transformers 5 returns an encoding unless mlx-lm's wrapper unwraps it
        rendered = rendered["input_ids"]
    return list(rendered)


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
