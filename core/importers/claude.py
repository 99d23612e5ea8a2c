"""Claude's data export: conversations.json (a list of conversations), and memories.json where present.

A conversation: {uuid, name, created_at, updated_at, chat_messages: [...]}; a message: {uuid, sender ("human" or
"assistant"), text, content: [{type: "text", text} | {type: "tool_use", …} | {type: "tool_result", …} |
{type: "thinking", …}], created_at, attachments, files}. Claude's conversations are linear, so every message is
imported in order. Tool use, tool results and the model's thinking are not anybody's words to the person: skipped and
counted, as are attachments and files (their names are not the person's words either).

memories.json is a list of {conversations_memory: text, project_memories: {project uuid: text}}: what Claude had
come to remember, as paragraphs or "- " lines; each line becomes one memory line to import.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from core.importers import memory_list
from core.importers.conversations import (ImportedConversation, Parsed, TurnBuilder, collect, epoch, expect_list,
                                          plain)


def parse(data: Any, memories: Any = None) -> Parsed:
    if isinstance(data, Mapping) and isinstance(data.get("conversations"), list):
        data = data["conversations"]  # some tools re-wrap the export
    parsed = collect(Parsed("claude"), expect_list(data, "a Claude export (conversations.json)"),
                     lambda item: isinstance(item.get("chat_messages"), list), _conversation)
    parsed.memories = memory_texts(memories)
    return parsed


def memory_texts(memories: Any) -> list[str]:
    texts: list[str] = []
    for entry in memories if isinstance(memories, list) else ():
        if not isinstance(entry, Mapping):
            continue
        texts += memory_list.lines(plain(entry.get("conversations_memory")))
        projects = entry.get("project_memories")
        for text in (projects.values() if isinstance(projects, Mapping) else ()):
            texts += memory_list.lines(plain(text))
    return list(dict.fromkeys(texts))


def _conversation(item: Mapping[str, Any], index: int, skipped: Counter) -> ImportedConversation:
    key = plain(item.get("uuid")) or f"#{index}"
    created = epoch(item.get("created_at"), 0.0) or 0.0
    builder = TurnBuilder(skipped)
    for number, message in enumerate(item["chat_messages"]):
        if not isinstance(message, Mapping):
            skipped["entries that are not messages"] += 1
            continue
        skipped["attachments and files"] += len(_list(message.get("attachments"))) + len(_list(message.get("files")))
        text = _text(message, skipped)
        if not text.strip():
            continue
        sender = message.get("sender")
        if sender in ("human", "user"):
            at = epoch(message.get("created_at"), created) or created
            builder.user(f"claude:{key}:{plain(message.get('uuid')) or number}", text, at)
        elif sender == "assistant":
            builder.assistant(text)
        else:
            skipped[f"{sender or 'unknown'} messages"] += 1
    title = plain(item.get("name")).strip() or "Imported conversation"
    return ImportedConversation(f"claude:{key}", title[:500], created, builder.finish())


def _text(message: Mapping[str, Any], skipped: Counter) -> str:
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        return plain(message.get("text"))
    pieces = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            pieces.append(plain(block.get("text")))
        else:
            skipped[f"{kind or 'unknown'} blocks"] += 1
    return "\n".join(p for p in pieces if p)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
