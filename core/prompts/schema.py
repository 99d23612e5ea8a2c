"""Small builders for the JSON Schemas the prompts ask for: every string is bounded."""
from __future__ import annotations

from typing import Any


def text(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": int(max_length)}


def obj(title: str | None = None, **properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": list(properties),
                              "additionalProperties": False}
    if title:
        schema["title"] = title
    return schema


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": int(max_items)}


def integer(minimum: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": int(minimum), "maximum": int(maximum)}


def quote(label: str, body: str) -> str:
    """Quoted text as data: delimited, with anything that looks like our delimiters defused."""
    body = body.replace("<<<", "‹‹‹").replace(">>>", "›››")
    return f"<<<{label}\n{body}\n{label}>>>"
