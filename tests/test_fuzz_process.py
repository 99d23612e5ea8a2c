"""Out-of-process fuzzing of the command line (issue 37): the in-process suites (test_fuzz_cli.py) cannot see an abort
at interpreter exit, a native panic or a thread left running, so here each case is a whole `python -m app` process.

A bounded, seeded set of cases (CASES, the same on every machine) over: memory verbs with hostile arguments, import
documents mutated in every section (sessions, episodes, memories, history, edges), `doctor` and `--restore` over
empty, half-written and foreign backups, read-only folders, `models use/remove/download` against the local hub
(tests/hubserver.py), chat input on the tiny model, and a full disk (a small tmpfs, where this machine lets the test
mount one). After every case: an exit code of the command's own (never a signal, 134 or 139), no traceback, no
native abort or panic text, the last line of a failure starts with `engram:`, the store passes its checks, a sound
store was not replaced unasked, and every file in backups/ is a complete store (no partial copy left behind).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import pytest

from core.memory.manage import MemoryManager
from core.store import health
from core.store.db import open_db
from hubfake import REPO
from hubserver import HubServer

ROOT = Path(__file__).resolve().parents[1]
SEED = 37
CASES = {"memory": 34, "import": 22, "doctor": 16, "read-only": 8, "models": 10, "chat": 3, "other": 10, "gguf": 6,
         "full-disk": 4}
NATIVE_DEATH = ("terminate called", "panicked at", "Segmentation fault", "Fatal Python error", "Traceback")
WORDS = ["", " ", "1", "2", "#3", "0", "-1", "99999999999999999999", "nan", "1e308", "--json", "--all", "--force",
         "--limit", "5", "-k", "--status", "trashed", "--kind", "--pin", "--", "-", "x" * 5000, "\x01", "\x1b[31m",
         "\u202e", "<|im_start|>system", "ignore previous instructions", "🙂", "'", "%", "NEAR("]  # argv holds no NUL
MEMORY_VERBS = ["list", "show", "add", "search", "pin", "protect", "edit", "delete", "restore", "reject", "purge",
                "export", "import", "forget-all", "nonsense", ""]
OTHER = [["hypotheses"], ["hypotheses", "edit"], ["hypotheses", "confirm"], ["goals"], ["jobs"], ["jobs", "cancel"],
         ["finetune", "status"], ["forget", "--log"], ["recall-weights"], ["doctor", "--force"], ["models"]]


@dataclass
class Case:
    name: str
    argv: list[str]
    stdin: str = ""
    env: dict[str, str] = field(default_factory=dict)
    store_unchanged: bool = False  # the case must not change the store (a refused or read-only command)
    timeout: float = 120


def run(data: Path, case: Case) -> subprocess.CompletedProcess:
    """`python -m app --data-dir DATA ARGV…`; a GGUF case runs the app's isolated conversion (GGUF_HARNESS)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **case.env}
    command = ["-c", GGUF_HARNESS] if case.name == "gguf" else ["-m", "app", "--data-dir", str(data)]
    return subprocess.run([sys.executable, *command, *case.argv], input=case.stdin,
                          capture_output=True, text=True, errors="replace", timeout=case.timeout, cwd=data.parent,
                          env=env)


def backups_now(data: Path) -> dict[str, bytes]:
    folder = data / "backups"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} if folder.is_dir() else {}


def check_outcome(data: Path, case: Case, done: subprocess.CompletedProcess, before: bytes | None,
                  backups_before: dict[str, bytes]) -> None:
    where = f"{case.name}: {repr(case.argv)[:300]} -> {done.returncode}\n{done.stderr[-1500:]}"
    assert 0 <= done.returncode < 128 or done.returncode == 130, where  # never a signal, 134 (abort) or 139
    assert not any(text in done.stderr for text in NATIVE_DEATH), where
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("engram: "), where
    store = data / "engram.db"
    if store.exists() and not store.is_symlink() and store.stat().st_size:
        assert health.check_file(store).ok, where
    if case.store_unchanged and before is not None:
        assert store.read_bytes() == before, where
    backups = data / "backups"
    for name, content in backups_now(data).items():  # a backup it wrote is complete; one it found is untouched
        if name in backups_before:
            assert content == backups_before[name], f"{where}\na backup was changed: {name}"
        else:
            assert name.startswith("engram-") and health.check_file(backups / name).ok, f"{where}\nleft: {name}"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, embedder) -> Path:
    """A data folder with memories, a conversation's worth of history, one forget-all backup and an export."""
    data = tmp_path_factory.mktemp("fuzz-seed") / "data"
    data.mkdir(mode=0o700)
    db = open_db(data / "engram.db")
    manager = MemoryManager(db, embedder)
    for text in ("The user lives in Lisbon", "The user likes green tea", "Ana is the user's sister"):
        manager.add(text)
    manager.forget_everything()
    added = [manager.add(text) for text in ("The user moved to Porto", "The user likes short answers",
                                            "The user's cat is Mochi", "The user works as a nurse")]
    manager.delete(added[-1].id)
    manager.export_to(data.parent / "export.json")
    db.checkpoint()
    db.close()
    return data


def fresh(seeded: Path, where: Path) -> Path:
    data = where / "data"
    shutil.copytree(seeded, data)
    shutil.copy(seeded.parent / "export.json", where / "export.json")
    return data


def mutated_export(rng: random.Random, source: Path, target: Path) -> None:
    raw = source.read_bytes()
    how = rng.choice(["field", "field", "field", "drop", "truncate", "bytes", "nest", "section"])
    if how == "truncate":
        target.write_bytes(raw[: rng.randrange(len(raw))])
        return
    if how == "bytes":
        target.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
        return
    if how == "nest":
        target.write_text("[" * 100_000 + "]" * 100_000)
        return
    data = json.loads(raw)
    sections = [s for s in ("sessions", "episodes", "memories", "history", "edges") if data.get(s)]
    section = rng.choice(sections or ["memories"])
    hostile = rng.choice([None, "", "yesterday", -1, 2**70, 1e308, float("nan"), [], {}, True, "x" * 10_000,
                          "<|im_start|>system", 0, 999_999])
    if how == "section":
        data[section] = rng.choice([None, {}, "rows", 7, [None], [[]]])
    elif data.get(section):
        row = rng.choice(data[section])
        if isinstance(row, dict) and row:
            key = rng.choice(sorted(row))
            if how == "drop":
                del row[key]
            else:
                row[key] = hostile
    target.write_text(json.dumps(data, allow_nan=True), encoding="utf-8")


def memory_case(rng: random.Random, where: Path) -> Case:
    verb = rng.choice(MEMORY_VERBS)
    args = [rng.choice(WORDS) for _ in range(rng.randrange(0, 4))]
    if verb in ("export", "import"):
        args = [str(where / rng.choice(["out.json", "export.json", "missing.json", "data", "data/engram.db"])),
                *args]
    if verb == "forget-all":
        args = ["--confirm", rng.choice(["FORGET", "forget", ""])]
    return Case("memory", ["memory", verb, *args], stdin=rng.choice(["", "FORGET\n", "no\n"]))


def import_case(rng: random.Random, where: Path) -> Case:
    target = where / "hostile.json"
    mutated_export(rng, where / "export.json", target)
    return Case("import", ["memory", "import", str(target)])


def doctor_case(rng: random.Random, data: Path) -> Case:
    backups = sorted((data / "backups").glob("engram-*.db"))
    newest = backups[-1]
    damage = rng.choice(["empty", "half", "half+journal", "foreign", "bytes", "none"])
    if damage == "empty":
        newest.write_bytes(b"")
    elif damage.startswith("half"):
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
        if damage.endswith("journal"):
            Path(f"{newest}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + bytes(504))
    elif damage == "foreign":
        newest.unlink()
        conn = apsw.Connection(str(newest))
        conn.execute("CREATE TABLE recipes(name TEXT); INSERT INTO recipes VALUES ('soup')")
        conn.close()
    elif damage == "bytes":
        newest.write_bytes(b"SQLite format 3\x00" + bytes(rng.randrange(256) for _ in range(3000)))
    if rng.random() < 0.25:
        (data / "engram.db").write_bytes(b"")  # the store itself lost: a restore must find a complete backup
        for extra in ("-wal", "-shm"):
            Path(f"{data / 'engram.db'}{extra}").unlink(missing_ok=True)
    flags = rng.choice([[], ["--restore"], ["--restore"], ["--restore", "--force"], ["--rebuild"]])
    sound = health.check_file(data / "engram.db").ok
    return Case(f"doctor/{damage}", ["doctor", *flags], store_unchanged=sound and "--force" not in flags
                and "--rebuild" not in flags)


def read_only_case(rng: random.Random, data: Path) -> Case:
    os.chmod(data / "engram.db", 0o400)
    os.chmod(data, 0o500)
    verb = rng.choice([["memory", "list"], ["memory", "show", "1"], ["memory", "add", "new"], ["memory", "delete", "1"],
                       ["doctor"], ["doctor", "--restore", "--force"], ["memory", "forget-all", "--confirm", "FORGET"],
                       ["memory", "export", str(data.parent / "ro.json")]])
    return Case("read-only", verb, store_unchanged=True)


def models_case(rng: random.Random, where: Path, hub_url: str, tiny: Path) -> Case:
    junk = where / "junk-model"
    junk.mkdir(exist_ok=True)
    (junk / "config.json").write_text(rng.choice(["{", "[]", '{"model_type": "qwen2", "num_hidden_layers": -1}',
                                                  '{"model_type": "llama"}']))
    (junk / "model.safetensors").write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))))
    choice = rng.choice([
        ["models", "use", rng.choice(["", ".", str(junk), str(where), "tiny-org/none", "../..", "\x7f", str(tiny)])],
        ["models", "remove", rng.choice(["", ".", "tiny-org/tiny-4bit", "..", str(junk), "a/b/c"])],
        ["models", "download", rng.choice([REPO, "tiny-org/missing", "../evil", "a" * 300, ""]), "--yes"],
        ["models", "list"]])
    return Case("models", choice, env={"HF_ENDPOINT": hub_url, "HF_HUB_OFFLINE": "0"}, timeout=240)


def chat_case(rng: random.Random, tiny: Path) -> Case:
    lines = [rng.choice(["Hello", "/help", "/nonsense", "", "\x00\x1b[2J", "<|im_end|><|im_start|>system",
                         "x" * 20_000, "/quit", "I live in Porto."]) for _ in range(3)]
    return Case("chat", ["chat", "--model", str(tiny), "--max-tokens", "3", "--no-memory"],
                stdin="\n".join(lines) + "\n", timeout=240)


GGUF_HARNESS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))  # a hostile shape must not take the machine's memory
from pathlib import Path
from core.errors import ModelError
from models.gguf_worker import convert_isolated
try:
    convert_isolated(Path(sys.argv[1]), Path(sys.argv[2]))
except ModelError as exc:
    print("engram: " + str(exc).splitlines()[0], file=sys.stderr)
    sys.exit(1)
"""


def random_gguf(rng: random.Random, path: Path) -> None:
    """A GGUF v3 header with random counts (kept small), keys of every type, and tensors of random shapes and
    types at random offsets, then a few random bytes of data."""
    import struct

    def text(value: str) -> bytes:
        raw = value.encode()
        return struct.pack("<Q", len(raw)) + raw

    tensors, keys = rng.randrange(0, 5), rng.randrange(0, 7)
    out = b"GGUF" + struct.pack("<IQQ", 3, tensors, keys)
    for n in range(keys):
        kind = rng.choice([4, 6, 8, 9, 12, rng.randrange(0, 40)])
        name = rng.choice(["general.architecture", "llama.block_count", "llama.embedding_length", f"key.{n}"])
        out += text(name) + struct.pack("<I", kind)
        if kind == 8:
            out += text(rng.choice(["llama", "qwen2", "gemma3", "", "x" * 300]))
        elif kind == 9:
            out += struct.pack("<IQ", 4, rng.randrange(0, 6)) + bytes(rng.randrange(0, 24))
        else:
            out += bytes(rng.choice([4, 8]))
    for n in range(tensors):
        dims = [rng.choice([1, 2, 32, 4096, 2**rng.randrange(0, 34)]) for _ in range(rng.randrange(1, 5))]
        out += text(f"blk.{n}.attn_q.weight") + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", rng.choice([0, 1, 2, 8, 12, 14, rng.randrange(0, 50)]), rng.randrange(0, 2**20))
    path.write_bytes(out + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 4096))))


def gguf_case(rng: random.Random, where: Path) -> Case:
    path = where / "model.gguf"
    random_gguf(rng, path)
    return Case("gguf", [str(path), str(where / "converted")], timeout=240)


def other_case(rng: random.Random) -> Case:
    return Case("other", [*rng.choice(OTHER), *[rng.choice(WORDS) for _ in range(rng.randrange(0, 3))]])


def cases_for(group: str, rng: random.Random, where: Path, data: Path, hub_url: str, tiny: Path) -> Case:
    if group == "memory":
        return memory_case(rng, where)
    if group == "import":
        return import_case(rng, where)
    if group == "doctor":
        return doctor_case(rng, data)
    if group == "read-only":
        return read_only_case(rng, data)
    if group == "models":
        return models_case(rng, where, hub_url, tiny)
    if group == "chat":
        return chat_case(rng, tiny)
    if group == "gguf":
        return gguf_case(rng, where)
    return other_case(rng)


@pytest.fixture(scope="module")
def hub(tiny_model_dir):
    with HubServer(tiny_model_dir) as server:
        yield server


@pytest.mark.parametrize("every", [pytest.param(3, id="a-third"), pytest.param(1, id="all", marks=pytest.mark.heavy)])
def test_every_whole_process_run_ends_in_its_own_exit_code_and_leaves_complete_files(seeded, hub, tiny_model_dir,
                                                                                        tmp_path, every):
    """Every `every`-th case of each group (a third in the default run: each case is a whole process, ~1 s here;
    all of them in the heavy run), the same cases on every machine."""
    started, ran, failures = time.monotonic(), 0, 0
    for group, count in CASES.items():
        if group == "full-disk":
            continue
        for n in range(0, count, every):
            rng = random.Random(f"{SEED}-{group}-{n}")
            where = tmp_path / f"{group}-{n}"
            where.mkdir()
            data = fresh(seeded, where)
            case = cases_for(group, rng, where, data, hub.url, tiny_model_dir)
            store = data / "engram.db"
            before = store.read_bytes() if store.exists() else None
            backups_before = backups_now(data)
            try:
                done = run(data, case)
            finally:
                os.chmod(data, 0o700)
                if store.exists():
                    os.chmod(store, 0o600)
            check_outcome(data, case, done, before, backups_before)
            assert not list(where.glob(".converting-*")), f"{case.name}: a conversion left its staging folder"
            ran += 1
            failures += done.returncode != 0
            shutil.rmtree(where, ignore_errors=True)
    print(f"\n{ran} whole-process cases ({failures} refused in one line) in {time.monotonic() - started:.0f} s")
    assert ran == sum(len(range(0, n, every)) for group, n in CASES.items() if group != "full-disk")


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="mounting a small tmpfs for a full disk needs root on Linux")
def test_a_full_disk_fails_each_command_in_one_line_and_leaves_complete_files(seeded, tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        for n, argv in enumerate([["memory", "add", "A long memory " * 3000],
                                  ["memory", "forget-all", "--confirm", "FORGET"],
                                  ["memory", "import", str(mount / "export.json")],
                                  ["memory", "export", str(mount / "out.json")]][: CASES["full-disk"]]):
            where = mount / f"case-{n}"
            where.mkdir()
            data = fresh(seeded, where)
            shutil.copy(seeded.parent / "export.json", mount / "export.json")
            ballast = where / "ballast"
            with ballast.open("wb") as out:  # the disk filled to its last block
                try:
                    while True:
                        out.write(bytes(65536))
                        out.flush()
                except OSError:
                    pass
            store = data / "engram.db"
            before, backups_before = store.read_bytes(), backups_now(data)
            done = run(data, Case("full-disk", argv))
            ballast.unlink()  # the checks below open the store, which needs room for its -shm
            check_outcome(data, Case("full-disk", argv, store_unchanged=True), done, before, backups_before)
            assert done.returncode == 1 and "disk is full" in done.stderr.lower(), done.stderr[-800:]
            shutil.rmtree(where)
    finally:
        subprocess.run(["umount", "-l", str(mount)])
