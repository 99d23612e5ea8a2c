"""Property-based fuzzing of the command line, in process (issue 13, "then look for more"): any argv for the memory
verbs, any argv for every other command group (the words are taken from the parser itself, so a new verb or option
is fuzzed as soon as it exists) and any import file end in exit 0, or in one `engram: …` line and a non-zero exit —
never a traceback; a refused command changes no row of the store; a command that succeeded leaves a file that passes
integrity_check; nothing printed carries a raw terminal control.

Each example runs on a fresh copy of a small seeded data folder, with a hash embedder in place of MiniLM (one
example at the end goes through the real embedder). The examples are derandomized: the same cases run on every
machine, in about a minute (`pytest tests/test_fuzz_cli.py --hypothesis-show-statistics` counts them).
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from app.cli.main import build_parser, run_cli
from core.store.db import open_db
from tests.fakes import HashEmbedder
from tests.fuzzkit import NASTY_CHARS, examples, fingerprint, texts

FUZZ = settings(max_examples=examples(400), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

NUMBERS = ["1", "2", "3", "#1", "-1", "0", str(2**63 - 1), str(2**63), str(2**64), "99999999999999999999", "nan",
           "inf", "-inf", "1e308", "1e9", "0.5", "-0", "١٢", "²", "0x10", "1_000"]
words = st.one_of(texts, st.sampled_from(["--json", "--all", "--off", "--limit", "-k", "--confidence", "--statement",
                                          "--status", "--kind", "--pin", "--protect", "--critical", "--reason", "--",
                                          "-", "-h", *NUMBERS, *NASTY_CHARS]))
verbs = st.sampled_from(["add", "search", "list", "show", "pin", "protect", "edit", "delete", "restore", "purge",
                         "export", "import", "nonsense", ""])


def _harmless(argv: list[str]) -> list[str]:
    """Keep a random command line inside its scratch folder: no absolute or home paths (an export to "/0" would
    write into the machine's root), and no --data-dir (an abbreviation such as `--da` included) or whole-app check."""
    kept = []
    for word in argv:
        name = word.split("=", 1)[0]
        if len(name) >= 3 and any(flag.startswith(name) for flag in ("--data-dir", "--self-check", "--screenshots")):
            continue
        kept.append("./" + word if word.startswith(("/", "~")) else word)
    return kept


memory_argvs = st.tuples(verbs, st.lists(words, max_size=5)).map(lambda t: _harmless(["memory", t[0], *t[1]]))


values = st.one_of(st.sampled_from(NUMBERS), texts, st.sampled_from(NASTY_CHARS))


def _leaves() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """Every command and verb of the parser, except what would leave this machine or load a chat model (`models
    download` and `use`, `chat`)."""
    root = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    leaves = []
    for name, parser in root.choices.items():
        if name == "chat":
            continue
        inner = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        leaves.append(([name], parser))  # a group named alone runs its listing
        for verb, sub in (inner[0].choices.items() if inner else ()):
            if (name, verb) not in {("models", "download"), ("models", "use")}:
                leaves.append(([name, verb], sub))
    return leaves


def _argv_for(path: list[str], parser: argparse.ArgumentParser) -> st.SearchStrategy:
    """A command line shaped as the parser expects (its positionals filled, some of its options given, each with a
    value of the right kind or a hostile one), so that most cases reach the command itself."""
    parts = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.dest in ("data_dir",
                                                                                                      "debug"):
            continue
        value = values
        if action.choices:
            value = st.one_of(st.sampled_from(list(action.choices)), values)
        elif action.type is not None:  # an id, a count or a number: mostly plausible ones, so the command runs
            value = st.one_of(st.sampled_from(["1", "2", "3", "#2", "0.5", "10"]), st.sampled_from(NUMBERS), values)
        if not action.option_strings:
            low, high = {None: (1, 1), "+": (1, 3), "*": (0, 3), "?": (0, 1)}.get(action.nargs, (0, 3))
            parts.append(st.lists(value, min_size=low, max_size=high))
        elif action.nargs == 0:
            parts.append(st.sampled_from([[], [action.option_strings[-1]]]))
        else:
            parts.append(st.one_of(st.just([]), value.map(lambda v, flag=action.option_strings[-1]: [flag, v])))
    return st.tuples(*parts).map(lambda chosen: _harmless([*path, *(word for part in chosen for word in part)]))


LEAVES = _leaves()
any_argvs = st.sampled_from(range(len(LEAVES))).flatmap(lambda i: _argv_for(*LEAVES[i]))


@pytest.fixture(scope="module", autouse=True)
def one_parser():
    """One parser for the module's ~1,700 command lines, as one `engram` process builds one: building it (argparse's
    gettext look-ups) was ~27 ms of each example's ~40; parsing leaves it as it was (the same exit codes and output
    for every example, checked against a fresh parser each)."""
    parser = build_parser()
    patch = pytest.MonkeyPatch()
    patch.setattr("app.cli.main.build_parser", lambda: parser)
    yield parser
    patch.undo()


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch):
    """The hash embedder wherever Services would load the real one (whichever loader it uses)."""
    from app.services.wiring import Services
    fake = HashEmbedder()
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: fake)
    monkeypatch.setattr(Services, "embedder", property(lambda self: fake))
    return fake


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A data folder with a few memories (one in the trash), a job and a conversation's worth of rows; each example
    works on a fresh copy of it."""
    from app.services.wiring import Services
    folder = tmp_path_factory.mktemp("fuzz-cli") / "data"
    patch = pytest.MonkeyPatch()
    patch.setattr(Services, "embedder", property(lambda self: HashEmbedder()))
    try:
        for statement in ("Ana lives in Lisbon.", "Ana likes green tea.", "A trashed note."):
            assert run_cli(["--data-dir", str(folder), "memory", "add", statement]) == 0
        assert run_cli(["--data-dir", str(folder), "memory", "delete", "3"]) == 0
        assert run_cli(["--data-dir", str(folder), "jobs", "run", "forgetting", "--queue-only"]) == 0
    finally:
        patch.undo()
    db = open_db(folder / "engram.db")
    rows = fingerprint(db)
    db.close()
    SEEDED[_files(folder)] = rows  # the files as closed (no -wal, -shm), as each example copies them
    return folder


SEEDED: dict[tuple, dict[str, str]] = {}  # a seeded folder's files -> its store's fingerprint


def _files(folder: Path) -> tuple:
    return tuple((str(p.relative_to(folder)), p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file())


def _run(folder: Path, argv: list[str], capsys) -> int:
    capsys.readouterr()
    # A fresh copy of the seeded folder (the same bytes) holds the same rows: its fingerprint is known, and opening
    # the copy to read it again was ~4 ms of an example's ~15
    before = SEEDED.get(_files(folder))
    if before is None:
        db = open_db(folder / "engram.db")
        before = fingerprint(db)
        db.close()
    code = run_cli(["--data-dir", str(folder), *argv])
    out, err = capsys.readouterr()
    assert isinstance(code, int)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\u2066"), (argv, out[:500])
    if code != 0:
        assert err.startswith("engram: ") and err.count("\n") == 1, (argv, err)
        assert not any(c in err for c in "\x1b\x07\x9b\u202e\u2066"), (argv, err)
    if currently_in_test_context():
        event(f"exit {code}")  # --hypothesis-show-statistics: how many got past the parser, how many succeeded
    if not (folder / "engram.db").exists():
        return code
    db = open_db(folder / "engram.db")
    try:
        if code != 0:
            assert fingerprint(db) == before, f"refused {argv!r} changed the store"
        else:
            assert db.scalar("PRAGMA integrity_check") == "ok", argv
    finally:
        db.close()
    return code


def _in_a_copy(seeded: Path, tmp_path: Path, monkeypatch, argv: list[str], capsys) -> int:
    monkeypatch.chdir(tmp_path)  # `memory export PATH` writes relative paths here, never into the repository
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "data"
        shutil.copytree(seeded, folder)
        return _run(folder, argv, capsys)


@FUZZ
@given(argv=memory_argvs)
def test_any_memory_command_line_ends_cleanly(seeded, tmp_path, capsys, monkeypatch, argv):
    _in_a_copy(seeded, tmp_path, monkeypatch, argv, capsys)


@settings(FUZZ, max_examples=examples(500))
@given(argv=any_argvs)
def test_any_command_line_of_any_group_ends_cleanly(seeded, tmp_path, capsys, monkeypatch, argv):
    _in_a_copy(seeded, tmp_path, monkeypatch, argv, capsys)


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
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "data"
        shutil.copytree(seeded, folder)
        path = Path(scratch) / "import.json"
        path.write_text(document, encoding="utf-8", errors="surrogatepass")
        _run(folder, ["memory", "import", str(path)], capsys)


def _mostly(valid: st.SearchStrategy, hostile: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(valid, valid, hostile)  # two valid draws for one hostile: whole documents do get through


memory_rows = st.fixed_dictionaries({
    "id": _mostly(st.integers(1, 50), st.integers(-3, 2**64)),
    "statement": _mostly(st.sampled_from(["Ana likes tea.", "Bo lives in Oslo.", "Zoë \u202e\x1b[2J"]), texts),
}, optional={
    "created_at": _mostly(st.floats(1e9, 2e9), st.floats(allow_nan=True) | st.integers(-(2**70), 2**70)),
    "confidence": _mostly(st.floats(0, 1), st.floats(allow_nan=True)),
    "importance": _mostly(st.floats(0, 1), st.floats(allow_nan=True) | st.text(max_size=3)),
    "access_count": _mostly(st.integers(0, 100), st.integers(-5, 2**70)),
    "protected": st.booleans(), "pinned": st.booleans(),
    "deleted_at": _mostly(st.none(), st.floats(0, 2e9) | st.text(max_size=3)),
    "kind": _mostly(st.sampled_from(["semantic", "episodic", "summary"]), st.sampled_from(["other", "", "\x00"]))})


@FUZZ
@given(rows=st.lists(memory_rows, max_size=4))
def test_an_export_shaped_import_is_taken_whole_or_refused_whole(seeded, tmp_path, capsys, monkeypatch, rows):
    """Documents that pass the format check, so that the fields themselves are what is fuzzed."""
    doc = {"format": "engram-export", "version": 1, "sessions": [], "episodes": [], "memories": rows,
           "history": [], "edges": []}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "data"
        shutil.copytree(seeded, folder)
        path = Path(scratch) / "import.json"
        path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8", errors="surrogatepass")
        _run(folder, ["memory", "import", str(path)], capsys)


def test_a_real_embedder_smoke_example(tmp_path, capsys, monkeypatch, embedder):
    """One pass through the real MiniLM embedder, so the fuzzed paths are not only the fake's."""
    from app.services.wiring import Services
    monkeypatch.setattr(Services, "embedder", property(lambda self: embedder))
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)  # a verb's load on first use
    folder = tmp_path / "data"
    assert run_cli(["--data-dir", str(folder), "memory", "add", "Zoë \u202e\x1b[2J lives in Oslo"]) == 0
    assert _run(folder, ["memory", "search", "\x00"], capsys) == 1
    assert _run(folder, ["memory", "search", "Oslo", "-k", str(2**63)], capsys) == 2
    assert _run(folder, ["memory", "search", "Oslo"], capsys) == 0
