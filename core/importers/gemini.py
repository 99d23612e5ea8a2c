"""Gemini's history from Google Takeout: My Activity → "Gemini Apps" (MyActivity.json).

Takeout keeps Gemini's history as activity entries, newest first, not as conversations: each entry is one prompt
and its response: {header: "Gemini Apps", title: "Prompted <the prompt>", time: ISO 8601, safeHtmlItem:
[{html: the response}], attachedFiles, subtitles, products}. Other entries ("Used an Assistant feature", feedback,
Canvas, another product's header) are not a prompt of the person's: skipped and counted. With no conversation ids,
prompts less than GAP apart form one conversation, named after its first prompt, keyed by its first entry's time
(stable across exports of the same history).
"""
from __future__ import annotations

import hashlib
import html
import re
from collections import Counter
from typing import Any, Mapping

from core.importers.conversations import (ImportedConversation, ImportedTurn, Parsed, clip, epoch, expect_list,
                                          plain)

GAP = 30 * 60.0  # seconds of silence that end a conversation
HEADERS = ("Gemini Apps", "Bard", "Gemini")
PROMPTED = "Prompted "
_TAG = re.compile(r"<[^>]*>")
_BREAK = re.compile(r"<\s*(?:br|/p|/li|/h[1-6]|/div)\s*/?\s*>", re.IGNORECASE)


def parse(data: Any) -> Parsed:
    parsed = Parsed("gemini")
    entries = []
    for item in expect_list(data, "Gemini's history (My Activity.json from Google Takeout)"):
        entry = _entry(item, parsed.skipped)
        if entry is not None:
            entries.append(entry)
    entries.sort(key=lambda e: e.created_at)
    group: list[ImportedTurn] = []
    for turn in entries:
        if group and turn.created_at - group[-1].created_at > GAP:
            parsed.conversations.append(_conversation(group))
            group = []
        group.append(turn)
    if group:
        parsed.conversations.append(_conversation(group))
    return parsed


def _entry(item: Any, skipped: Counter) -> ImportedTurn | None:
    if not isinstance(item, Mapping) or item.get("header") not in HEADERS:
        skipped["activity of other products"] += 1
        return None
    title = plain(item.get("title"))
    at = epoch(item.get("time"))
    if not title.startswith(PROMPTED) or at is None:
        skipped["Gemini activity that is not a prompt"] += 1
        return None
    skipped["images and attachments"] += len(item.get("attachedFiles") or ()) if isinstance(
        item.get("attachedFiles"), list) else 0
    prompt = title[len(PROMPTED):].strip()
    if not prompt:
        return None
    reply = "\n".join(_html_text(h.get("html")) for h in item.get("safeHtmlItem") or () if isinstance(h, Mapping))
    key = hashlib.sha256(f"{item.get('time')}\n{prompt}".encode("utf-8", "replace")).hexdigest()[:24]
    return ImportedTurn(f"gemini:{key}", clip(prompt, skipped), clip(reply.strip(), skipped), at)


def _conversation(turns: list[ImportedTurn]) -> ImportedConversation:
    first = turns[0]
    title = " ".join(first.user_text.split())[:80] or "Imported conversation"
    return ImportedConversation(f"gemini:{first.key.split(':', 1)[1]}", title, first.created_at, tuple(turns))


def _html_text(value: Any) -> str:
    """The response's words: tags dropped (line breaks kept), entities decoded. Never rendered, only stored."""
    text = _BREAK.sub("\n", plain(value))
    text = html.unescape(_TAG.sub("", text))
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())
