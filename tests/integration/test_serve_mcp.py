"""Issue 39 §2: the MCP SDK's own client starts `engram mcp` over stdio and uses the user's memory — search, list,
and, for a read-write grant only, add, edit and forget — under the rules the window keeps (never a critical,
protected or pinned memory), every call logged; a client without a valid token is refused before any MCP."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core.clients import AccessLog, ClientRegistry
from core.memory.manage import MemoryManager
from core.store.db import open_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, embedder):
    data = tmp_path / "data"
    db = open_db(data / "engram.db")
    manager = MemoryManager(db, embedder)
    ids = {"cat": manager.add("The user's cat is called Mochi").id,
           "allergy": manager.add("The user is allergic to peanuts", critical=True).id,
           "city": manager.add("The user lives in Porto").id}
    db.close()
    registry = ClientRegistry(data, time.time)
    return data, ids, {"reader": registry.grant("Zed"), "writer": registry.grant("Cursor", "write")}


def _params(data, token):
    env = {**os.environ, "ENGRAM_TOKEN": token, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=["-m", "app", "--data-dir", str(data), "mcp"],
                                 env=env, cwd=str(ROOT))


def _session(data, token, work):
    async def run():
        async with stdio_client(_params(data, token)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)
    return anyio.run(run)


def _payload(result):
    assert not result.is_error, result.content
    if result.structured_content is not None:
        value = result.structured_content
        return value.get("result", value) if isinstance(value, dict) else value
    return json.loads(result.content[0].text)


def test_a_read_write_client_uses_the_memory_within_the_users_rules(home):
    data, ids, tokens = home

    async def work(session):
        names = {tool.name for tool in (await session.list_tools()).tools}
        found = _payload(await session.call_tool("search_memories", {"query": "What is my cat's name?", "limit": 3}))
        added = _payload(await session.call_tool("add_memory", {"statement": "The user plays the cello"}))
        edited = _payload(await session.call_tool("edit_memory", {"memory_id": ids["city"],
                                                                  "statement": "The user lives in Braga"}))
        refused = await session.call_tool("forget_memory", {"memory_id": ids["allergy"]})
        return names, found, added, edited, refused

    names, found, added, edited, refused = _session(data, tokens["writer"], work)
    assert names == {"search_memories", "list_memories", "add_memory", "edit_memory", "forget_memory"}
    assert found[0]["statement"] == "The user's cat is called Mochi"
    assert added["statement"] == "The user plays the cello" and edited["statement"] == "The user lives in Braga"
    assert refused.is_error and "critical, protected or pinned" in refused.content[0].text
    db = open_db(data / "engram.db")
    try:
        assert db.scalar("SELECT deleted_at FROM memories WHERE id = ?", (ids["allergy"],)) is None
    finally:
        db.close()
    said = [entry.describe() for entry in AccessLog(data, time.time).recent()]
    assert said[-1].startswith("Cursor read 1 memory") or said[-1].startswith("Cursor read")
    assert any(line.startswith("Cursor added") for line in said) and any("refused" in line for line in said)


def test_a_read_only_client_has_no_writing_tools(home):
    data, _ids, tokens = home

    async def work(session):
        names = {tool.name for tool in (await session.list_tools()).tools}
        listed = _payload(await session.call_tool("list_memories", {"limit": 5}))
        return names, listed

    names, listed = _session(data, tokens["reader"], work)
    assert names == {"search_memories", "list_memories"}
    assert {m["statement"] for m in listed} >= {"The user's cat is called Mochi", "The user lives in Porto"}


def test_a_client_without_a_valid_token_is_refused(home):
    data, _ids, _tokens = home
    done = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data), "mcp"], cwd=ROOT, input="",
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ENGRAM_TOKEN": "engram-forged", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("engram: this app has no valid token")
    assert AccessLog(data, time.time).recent()[0].action == "refused"
