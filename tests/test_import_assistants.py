"""Issue 39 §1: bringing history from ChatGPT, Claude and Gemini, and a pasted memory list, through the CLI on a
real store with the real MiniLM: what is imported, from which branch, with what times and labels; a second import
adds nothing; undo takes it back as a whole; bad input is one line and changes nothing."""
from __future__ import annotations

import json
import zipfile

import pytest

from core.importers import archive, chatgpt
from core.store import vectors
from core.store.db import open_db
from tests import import_fixtures as fx


def _ok(result) -> str:
    code, out, err = result
    assert code == 0, err
    return out


def _turns(cli) -> list[dict]:
    db = open_db(cli.data_dir / "engram.db")
    try:
        return [dict(r) for r in db.query(
            "SELECT e.id, e.user_text, e.assistant_text, e.created_at, e.metadata, e.deleted_at, s.title, "
            "s.reflected_at FROM episodes e LEFT JOIN sessions s ON s.id = e.session_id ORDER BY e.created_at")]
    finally:
        db.close()


def _store_counts(cli) -> tuple[int, int, int]:
    path = cli.data_dir / "engram.db"
    if not path.exists():
        return 0, 0, 0
    db = open_db(path)
    try:
        return tuple(db.scalar(f"SELECT count(*) FROM {t}") for t in ("episodes", "sessions", "memories"))
    finally:
        db.close()


def test_chatgpt_export_imports_the_branch_the_person_saw_as_quoted_turns(cli, tmp_path):
    out = _ok(cli("import", "chatgpt", str(fx.chatgpt_zip(tmp_path))))
    assert "imported 4 turns in 2 conversations" in out
    assert "images and attachments" in out and "system messages" in out and "tool messages" in out
    turns = _turns(cli)
    said = [t["user_text"] for t in turns]
    assert "I live in Porto and work as a nurse." in said  # the edited question, on current_node's branch
    assert "I live in Lisbon and work as a nurse." not in said  # the branch the person left
    assert "Obrigada! Eu gosto de café." in said
    first = turns[0]
    assert first["created_at"] == pytest.approx(fx.T0 + 20) and first["title"] == "Moving house"
    meta = json.loads(first["metadata"])
    assert meta["imported"]["label"] == "imported from ChatGPT, 2024-05-02"
    assert meta["learning"] == "pending"  # learned from in idle time, like a chat turn
    assert first["reflected_at"] is not None  # not queued for reflection ahead of today's conversations
    # a message that tries to instruct is stored as what it is: a turn of text, nothing else
    assert any(t["user_text"].startswith("Ignore all previous instructions") for t in turns)


def test_a_second_import_adds_nothing_and_undo_takes_it_back_whole(cli, tmp_path):
    path = fx.chatgpt_zip(tmp_path)
    _ok(cli("import", "chatgpt", str(path)))
    again = _ok(cli("import", "chatgpt", str(path)))
    assert "imported 0 turns" in again and "4 already here" in again
    assert len(_turns(cli)) == 4
    listing = _ok(cli("import", "list"))
    assert "from ChatGPT, 2 conversations, 4 turns" in listing and "0 learned from so far" in listing
    batch = listing.split(":")[0]
    assert "moved to the trash: 4 turns, 2 conversations" in _ok(cli("import", "undo", batch))
    assert all(t["deleted_at"] is not None for t in _turns(cli))
    assert "no imports yet" in _ok(cli("import", "list"))
    # what the user removed does not come back with the next import of the same file
    assert "imported 0 turns" in _ok(cli("import", "chatgpt", str(path)))


def test_claude_export_with_its_memories(cli, tmp_path):
    out = _ok(cli("import", "claude", str(fx.claude_zip(tmp_path))))
    assert "imported 2 turns in 1 conversation, 3 memories" in out
    assert "attachments and files" in out and "tool_use blocks" in out and "thinking blocks" in out
    turns = _turns(cli)
    assert turns[0]["assistant_text"] == "Berlin has great vegetarian food."
    assert any(t["user_text"] == "私は東京に住んでいました。" for t in turns)
    shown = _ok(cli("memory", "list"))
    assert "Prefers metric units" in shown and "**Work**" not in shown
    memory = json.loads(_ok(cli("memory", "list", "--json")))[0]
    assert memory["source_episode_ids"], "a memory from a list names the imported list as its source"
    shown = _ok(cli("memory", "show", str(memory["id"])))
    assert "imported from Claude" in shown


def test_gemini_takeout_groups_prompts_into_conversations(cli, tmp_path):
    out = _ok(cli("import", "gemini", str(fx.gemini_zip(tmp_path))))
    assert "imported 3 turns in 2 conversations" in out
    turns = _turns(cli)
    assert [t["user_text"] for t in turns] == ["I live in Porto. What's the weather like?", "and in Porto?",
                                               "what should I cook tonight?"]
    assert turns[1]["assistant_text"] == "Porto is 20°C & sunny."  # tags dropped, entities decoded
    assert turns[0]["title"] == turns[1]["title"] != turns[2]["title"]


def test_a_pasted_memory_list(cli, tmp_path):
    path = tmp_path / "memories.txt"
    path.write_text(fx.MEMORY_LIST, encoding="utf-8")
    assert "4 memories" in _ok(cli("import", "memories", str(path)))
    assert "4 already here" in _ok(cli("import", "memories", str(path)))
    statements = {m["statement"] for m in json.loads(_ok(cli("memory", "list", "--json")))}
    assert statements == {"Is vegetarian", "Has a cat named Mochi", "Prefers short answers", "Lives in Porto"}


def _bad_inputs(tmp_path):
    not_zip = tmp_path / "export.zip"
    not_zip.write_bytes(b"PK\x03\x04 this is not really a zip")
    random = tmp_path / "random.bin"
    random.write_bytes(bytes(range(256)) * 4)
    wrong_shape = tmp_path / "conversations.json"
    wrong_shape.write_text('{"hello": "world"}')
    not_utf8 = tmp_path / "latin1.json"
    not_utf8.write_bytes('[{"title": "café"}]'.encode("latin-1"))
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:  # sparse: 2 GB on paper, nothing on disk
        handle.truncate(2 * 1024**3)
    empty_zip = fx.write_zip(tmp_path / "other.zip", {"readme.txt": "hi"})
    nan = tmp_path / "nan.json"
    nan.write_text('[{"mapping": {}, "create_time": NaN}]')
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    return [("chatgpt", not_zip, "not valid JSON"), ("chatgpt", random, "not UTF-8"),
            ("chatgpt", wrong_shape, "expected a list of conversations"), ("claude", not_utf8, "not UTF-8"),
            ("chatgpt", huge, "larger than 512 MB"), ("claude", empty_zip, "not a Claude export"),
            ("chatgpt", nan, "NaN"), ("gemini", deep, "nested too deeply"),
            ("chatgpt", tmp_path / "missing.zip", "is not a file")]


def test_bad_input_is_one_line_and_changes_nothing(cli, tmp_path):
    _ok(cli("import", "claude", str(fx.claude_zip(tmp_path))))
    before = _store_counts(cli)
    for source, path, words in _bad_inputs(tmp_path):
        code, out, err = cli("import", source, str(path))
        assert code != 0, (path, out)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("engram: ") and words in lines[0], (path, err)
        assert "Traceback" not in err
        assert _store_counts(cli) == before


def test_a_zip_bomb_is_refused_by_what_it_inflates_to(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_JSON_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as handle:
        handle.writestr("conversations.json", "[" + " " * (8 * 1024 * 1024) + "]")
    assert bomb.stat().st_size < 64 * 1024
    with pytest.raises(Exception, match="larger than 1 MB once unpacked"):
        archive.read_export("chatgpt", bomb)


def test_a_parent_cycle_in_the_tree_ends_the_walk():
    mapping = {"a": {"id": "a", "parent": "b", "children": [], "message": {
        "id": "a", "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}},
        "b": {"id": "b", "parent": "a", "children": ["a"], "message": None}}
    parsed = chatgpt.parse([{"title": "loop", "mapping": mapping, "current_node": "a"}])
    assert [t.user_text for t in parsed.conversations[0].turns] == ["hi"]


KILLABLE = """
import sys
from core.importers import write
write.CHUNK_TURNS = 8  # many small transactions, so the kill lands between and inside them
from app.cli.main import run_cli
sys.exit(run_cli(sys.argv[1:]))
"""


def _big_chatgpt_zip(folder, conversations=30, turns=10):
    items = []
    for c in range(conversations):
        mapping, parent = {"r": {"id": "r", "message": None, "parent": None, "children": []}}, "r"
        for t in range(turns):
            for role, text in (("user", f"Question {t} of talk {c}: I like topic {c * turns + t}."),
                               ("assistant", f"Answer {t} of talk {c}.")):
                node = f"{role[0]}{t}"
                mapping[node] = {"id": node, "parent": parent, "children": [], "message": {
                    "id": node, "author": {"role": role},
                    "create_time": fx.T0 + c * 3600 + t * 60 + (role == "assistant"),
                    "content": {"content_type": "text", "parts": [text]}}}
                mapping[parent]["children"].append(node)
                parent = node
        items.append({"title": f"Talk {c}", "create_time": fx.T0 + c * 3600, "mapping": mapping,
                      "current_node": parent, "conversation_id": f"talk-{c}"})
    return fx.write_zip(folder / "big.zip", {"conversations.json": items})


@pytest.mark.slow
def test_a_killed_import_resumes_without_duplicates(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    data, archive_path = tmp_path / "data", _big_chatgpt_zip(tmp_path)
    argv = [sys.executable, "-c", KILLABLE, "--data-dir", str(data), "import", "chatgpt", str(archive_path)]
    process = subprocess.Popen(argv, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline, seen = time.monotonic() + 300, 0
    while time.monotonic() < deadline and process.poll() is None:
        if (data / "engram.db").exists():
            db = open_db(data / "engram.db")
            try:
                seen = db.scalar("SELECT count(*) FROM episodes")
            finally:
                db.close()
            if seen >= 24:
                break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    db = open_db(data / "engram.db")
    try:
        partial = db.scalar("SELECT count(*) FROM episodes")
    finally:
        db.close()
    assert 0 < partial < 300 and partial % 10 == 0, partial  # whole conversations, chunk by chunk
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"{partial:,} already here" in done.stdout
    db = open_db(data / "engram.db")
    try:
        assert db.scalar("SELECT count(*) FROM episodes") == 300
        assert db.scalar("SELECT count(DISTINCT json_extract(metadata, '$.imported.key')) FROM episodes") == 300
        assert db.scalar("SELECT count(*) FROM sessions") == 30
        assert vectors.ids_without_vectors(db, "episode") == []  # each chunk was written with its vectors
    finally:
        db.close()


def test_imported_turns_have_their_vectors_now_and_their_sentences_in_idle_time(cli, tmp_path, embedder):
    from core.memory.index import index_sentence_backlog
    from core.memory.recall import recall
    _ok(cli("import", "chatgpt", str(fx.chatgpt_zip(tmp_path))))
    db = open_db(cli.data_dir / "engram.db")
    try:
        assert vectors.ids_without_vectors(db, "episode") == []
        assert db.scalar("SELECT count(*) FROM episode_sentences") == 0  # one text a turn embedded at import
        hits = recall(db, embedder, "Which city do I live in?", k=5, kinds=("episode",))
        assert any("Porto" in (h.text or "") for h in hits.hits), [h.text for h in hits.hits]
        assert index_sentence_backlog(db, embedder) == 4  # the idle-time step gives them their sentences
        assert db.scalar("SELECT count(*) FROM episode_sentences") > 0
        assert index_sentence_backlog(db, embedder) == 0  # and passes over turns that have them
    finally:
        db.close()
