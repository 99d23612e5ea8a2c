"""ChatGPT's data export: conversations.json, a list of conversations whose messages form a tree.

Each conversation has `mapping` (node id → {id, message, parent, children}) and `current_node`: editing a message
or regenerating a reply adds a branch, and the conversation the person last saw is the path from `current_node` up
to the root. Only that branch is imported. A message has `author.role` (user, assistant, system, tool), `content`
(`content_type` "text" with string `parts`, or "multimodal_text" whose parts mix strings and image pointers, or
code/execution output, …) and `create_time` in seconds. System and tool messages, hidden messages and what is not
text are never the person's words: skipped and counted.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from core.importers.conversations import (ImportedConversation, Parsed, TurnBuilder, collect, epoch, expect_list,
                                          plain)

TEXT_TYPES = {"text", "multimodal_text"}
MAX_DEPTH = 1_000_000  # a cycle in `parent` links must end the walk, not hang it


def parse(data: Any) -> Parsed:
    return collect(Parsed("chatgpt"), expect_list(data, "a ChatGPT export (conversations.json)"),
                   lambda item: isinstance(item.get("mapping"), Mapping), _conversation)


def _conversation(item: Mapping[str, Any], index: int, skipped: Counter) -> ImportedConversation:
    key = plain(item.get("conversation_id") or item.get("id")) or f"#{index}"
    created = epoch(item.get("create_time"), 0.0) or 0.0
    builder = TurnBuilder(skipped)
    for node_id, message in _branch(item["mapping"], item.get("current_node")):
        _add(builder, f"chatgpt:{key}:{node_id}", message, created, skipped)
    title = plain(item.get("title")).strip() or "Imported conversation"
    return ImportedConversation(f"chatgpt:{key}", title[:500], created, builder.finish())


def _branch(mapping: Mapping[str, Any], current: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """The messages on the path from the root to `current_node`, oldest first. Without a valid current node, the
    newest leaf's path (what the person saw last)."""
    if not isinstance(current, str) or current not in mapping:
        current = _newest_leaf(mapping)
    path: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    node_id = current
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen and len(seen) < MAX_DEPTH:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, Mapping):
            break
        if isinstance(node.get("message"), Mapping):
            path.append((node_id, node["message"]))
        node_id = node.get("parent")
    return path[::-1]


def _newest_leaf(mapping: Mapping[str, Any]) -> str | None:
    leaves = [(epoch((node.get("message") or {}).get("create_time"), 0.0) or 0.0, key)
              for key, node in mapping.items()
              if isinstance(node, Mapping) and not node.get("children") and isinstance(node.get("message"), Mapping)]
    return max(leaves)[1] if leaves else None


def _add(builder: TurnBuilder, key: str, message: Mapping[str, Any], created: float, skipped: Counter) -> None:
    role = (message.get("author") or {}).get("role") if isinstance(message.get("author"), Mapping) else None
    metadata = message["metadata"] if isinstance(message.get("metadata"), Mapping) else {}
    if role in ("system", "tool") or metadata.get("is_visually_hidden_from_conversation"):
        skipped[f"{role or 'hidden'} messages"] += 1
        return
    text = _text(message.get("content"), skipped)
    if not text.strip():
        return
    if role == "user":
        builder.user(key, text, epoch(message.get("create_time"), created) or created)
    elif role == "assistant":
        builder.assistant(text)
    else:
        skipped["messages from an unknown author"] += 1


def _text(content: Any, skipped: Counter) -> str:
    if not isinstance(content, Mapping):
        return ""
    kind = content.get("content_type")
    if kind not in TEXT_TYPES:
        skipped[f"{kind or 'unknown'} content"] += 1  # code, execution output, browsing, reasoning: not a message
        return ""
    pieces = []
    for part in content.get("parts") or ():
        if isinstance(part, str):
            pieces.append(plain(part))
        elif isinstance(part, Mapping):  # image_asset_pointer, audio, a file: not text
            skipped["images and attachments"] += 1
    return "\n".join(p for p in pieces if p)
