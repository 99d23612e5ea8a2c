"""Property-based fuzzing of the command line, in process: any argv for the memory verbs and any import file ends
in exit 0, or in one `engram: …` line and a non-zero exit — never a traceback — and a refused command changes no
row of the store."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import run_cli
from core.store.db import open_db
from tests.fakes import HashEmbedder
from tests.fuzzkit import NASTY_CHARS, fingerprint, texts

FUZZ = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

words = st.one_of(texts, st.sampled_from(["1", "2", "#1", "-1", "0", str(2**63), str(2**64), "99999999999999999999",
                                          "nan", "inf", "-inf", "1e308", "--json", "--all", "--off", "--limit",
                                          "-k", "--confidence", "--statement", "--status", "--kind", "--pin",
                                          "--protect", "--critical", "--reason", "--", "-", *NASTY_CHARS]))
verbs = st.sampled_from(["add", "search", "list", "show", "pin", "protect", "edit", "delete", "restore", "purge",
                         "export", "import", "nonsense", ""])
argvs = st.tuples(verbs, st.lists(words, max_size=5)).map(lambda t: ["memory", t[0], *t[1]])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A data folder with a few memories, one in the trash; each example works on a fresh copy of it."""
    folder = tmp_path_factory.mktemp("fuzz-cli") / "data"
    pytest.MonkeyPatch().setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    for statement in ("Ana lives in Lisbon.", "Ana likes green tea.", "A trashed note."):
        assert run_cli(["--data-dir", str(folder), "memory", "add", statement]) == 0
    assert run_cli(["--data-dir", str(folder), "memory", "delete", "3"]) == 0
    return folder


def _run(folder: Path, argv: list[str], capsys) -> None:
    capsys.readouterr()
    db = open_db(folder / "engram.db")
    before = fingerprint(db)
    db.close()
    code = run_cli(["--data-dir", str(folder), *argv])
    out, err = capsys.readouterr()
    assert isinstance(code, int)
    assert "Traceback" not in err and "Traceback" not in out
    if code != 0:
        assert err.startswith("engram: ") and err.count("\n") == 1, (argv, err)
        if (folder / "engram.db").exists():
            db = open_db(folder / "engram.db")
            try:
                assert fingerprint(db) == before, f"refused {argv!r} changed the store"
            finally:
                db.close()
    assert "\x1b" not in out and "\u202e" not in out


@FUZZ
@given(argv=argvs)
def test_any_memory_command_line_ends_cleanly(seeded, tmp_path, capsys, monkeypatch, argv):
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    monkeypatch.chdir(tmp_path)  # `memory export PATH` writes relative paths here, never into the repository
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "data"
        shutil.copytree(seeded, folder)
        _run(folder, argv, capsys)


deep_documents = st.integers(min_value=1, max_value=200_000).map(lambda n: "[" * n + "]" * n)
documents = st.one_of(
    deep_documents,
    st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | texts,
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                 max_leaves=10).map(lambda v: json.dumps(v, allow_nan=True)),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
)


@FUZZ
@given(document=documents)
def test_any_import_file_ends_cleanly(seeded, tmp_path, capsys, monkeypatch, document):
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "data"
        shutil.copytree(seeded, folder)
        path = Path(scratch) / "import.json"
        path.write_text(document, encoding="utf-8", errors="surrogatepass")
        _run(folder, ["memory", "import", str(path)], capsys)


def test_a_real_embedder_smoke_example(tmp_path, capsys, monkeypatch, embedder):
    """One pass through the real MiniLM embedder, so the fuzzed paths are not only the fake's."""
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)
    folder = tmp_path / "data"
    assert run_cli(["--data-dir", str(folder), "memory", "add", "Zoë \u202e\x1b[2J lives in Oslo"]) == 0
    _run(folder, ["memory", "search", "\x00"], capsys)
    _run(folder, ["memory", "search", "Oslo"], capsys)
