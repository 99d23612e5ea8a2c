"""core.importers.json_stream: an export's top-level list read item by item gives what json.loads gives, across
every cut of the text into chunks, and refuses what json.loads refuses with the same one line."""
from __future__ import annotations

import io
import json

import pytest

from core.errors import InvalidInput
from core.importers import json_stream
from core.importers.json_stream import json_items

LIMIT = 1 << 30


def _read(raw: bytes, name: str = "conversations.json"):
    value = json_items(name, io.BytesIO(raw), LIMIT)
    return list(value) if not isinstance(value, (dict, str, int, float)) and value is not None else value


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_the_same_values_as_a_whole_read_whatever_the_chunks(monkeypatch, chunk):
    monkeypatch.setattr(json_stream, "CHUNK", chunk)
    items = [{"title": "café ☕ 東京", "mapping": {"a": {"parts": ["x" * 50, "\"quoted\""]}}}, 12345, -0.5e3,
             "a string", [], {}, [1, [2, [3]]], None, True, 7]
    text = "\ufeff \n" + json.dumps(items, ensure_ascii=False, indent=1) + "\n"
    assert _read(text.encode("utf-8")) == items
    assert _read(b"[]") == [] and _read(b" [ ] ") == []
    assert _read(b'{"conversations": [1, 2]}') == {"conversations": [1, 2]}  # not a list: read whole


@pytest.mark.parametrize("raw, words", [
    (b"[1, 2", "not valid JSON (line 1, column 6)"),
    (b"[1 2]", "not valid JSON (line 1, column 4)"),
    (b"[1,]", "not valid JSON"),
    (b'[{"a": 1}] x', "not valid JSON (line 1, column 12)"),
    (b'[\n{"a": 1},\n{"b": }]', "not valid JSON (line 3, column 7)"),
    (b"", "not valid JSON (line 1, column 1)"),
    (b'[{"t": NaN}]', "NaN"),
    (b'["caf\xe9"]', "not UTF-8 text (byte 5)"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
])
def test_refusals_are_one_line(monkeypatch, raw, words):
    monkeypatch.setattr(json_stream, "CHUNK", 4)
    with pytest.raises(InvalidInput, match=words.replace("(", r"\(").replace(")", r"\)")):
        _read(raw)


def test_a_file_larger_than_its_limit_is_refused_as_it_is_read():
    raw = b"[" + b'"x", ' * 1000 + b'"x"]'
    with pytest.raises(InvalidInput, match="larger than 0 MB once unpacked"):
        list(json_items("big.json", io.BytesIO(raw), 1000))
