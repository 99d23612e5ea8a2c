"""`engram models list|download|remove|use` through app.cli.main.run_cli, against the local fake hub (no network)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from app.cli.main import run_cli
from core.config import load_settings
from core.errors import ModelError
from models.download import STAGING, ModelStore
from models.registry import GB

from hubfake import REPO, FakeHub


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys, tiny_model_dir):
    """run(*argv) -> (code, out, err) on a private data folder; the store serves hubs from `run.hubs`."""
    data_dir = tmp_path / "data"
    hubs = {REPO: FakeHub(tiny_model_dir)}
    ram = {"bytes": 16 * GB}
    # a Mac's GPU, whatever this machine is: the recommendation's speed part is tested in test_machine_speed.py
    monkeypatch.setattr("models.speed.machine_key", lambda: "Darwin arm64 8 cpus, mlx on Device(gpu, 0)")
    monkeypatch.setattr("models.speed.probe_bandwidth", lambda: 90e9)

    class Hubs:  # one fake hub per repo id, as the real hub serves many
        def listing(self, repo_id):
            if repo_id not in hubs:
                raise ModelError(f"Cannot reach {repo_id} on Hugging Face: 404")
            return hubs[repo_id].listing(repo_id)

        def chunks(self, repo_id, revision, filename, start):
            return hubs[repo_id].chunks(repo_id, revision, filename, start)

        def cached(self, repo_id):
            return None

    monkeypatch.setattr("app.cli.models.open_store",
                        lambda services: ModelStore(services.models_dir, total_ram=ram["bytes"], hub=Hubs(),
                                                    sleep=lambda seconds: None))

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run_cli(["--data-dir", str(data_dir), *argv])
        out, err = capsys.readouterr()
        return code, out, err
    run.data_dir, run.hubs, run.ram = data_dir, hubs, ram
    return run


def folder_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def installed(cli) -> list[str]:
    code, out, _ = cli("models", "list", "--json")
    assert code == 0
    return [row["repo_id"] for row in json.loads(out)["models"] if row["installed"]]


def test_list_shows_the_registry_with_fit_and_a_recommendation(cli):
    code, out, _ = cli("models", "list")
    assert code == 0
    assert "Qwen3-0.6B-4bit" in out and "fits" in out
    assert "engram models download" in out  # nothing installed yet: says how to get one
    listing = json.loads(cli("models", "list", "--json")[1])
    assert sum(row["recommended"] for row in listing["models"]) == 1
    assert {row["fit"] for row in listing["models"]} <= {"fits", "tight", "too big"}
    assert listing["budget_bytes"] == 16 * GB and listing["budget_source"] in ("gpu", "total", "available")
    recommended = next(row["name"] for row in listing["models"] if row["recommended"])
    line = next(line for line in out.splitlines() if recommended in line)
    assert line.rstrip().endswith("Recommended")
    assert "Fit is measured against" in out and "16.0 GB" in out


def test_list_verdicts_follow_the_budget(cli):
    cli.ram["bytes"] = 5726633984  # what the GPU may use on an 8 GB Mac
    rows = {row["name"]: row for row in json.loads(cli("models", "list", "--json")[1])["models"]}
    assert rows["Qwen3-8B-4bit"]["fit"] == "too big" and rows["Qwen3-4B-4bit"]["fit"] == "fits"
    assert rows["Qwen3-4B-4bit"]["recommended"]
    code, out, _ = cli("models", "list")
    assert "too big" in out


def test_download_shows_size_and_progress_installs_and_becomes_active(cli, tiny_model_dir):
    code, out, err = cli("models", "download", REPO, "--yes")
    assert code == 0, err
    total = sum(p.stat().st_size for p in tiny_model_dir.iterdir() if p.is_file())
    assert f"{len(list(tiny_model_dir.iterdir()))} files" in out
    assert "100.0%" in err and "/s" in err and "ETA" in err
    assert "Installed tiny-org/tiny-4bit" in out and "now the chat model" in out
    assert load_settings(cli.data_dir).chat_model == REPO
    assert installed(cli) == [REPO]
    listing = json.loads(cli("models", "list", "--json")[1])
    row = next(r for r in listing["models"] if r["repo_id"] == REPO)
    assert row["active"] and row["size_bytes"] >= total


def test_use_and_remove(cli, tiny_model_dir):
    cli("models", "download", REPO, "--yes")
    code, out, err = cli("models", "use", str(tiny_model_dir))
    assert code == 0, err
    assert load_settings(cli.data_dir).chat_model == str(tiny_model_dir.resolve())
    assert cli("models", "use", "tiny-4bit")[0] == 0
    assert load_settings(cli.data_dir).chat_model == REPO
    code, out, _ = cli("models", "remove", "tiny-4bit")
    assert code == 0 and "It was the chat model" in out
    assert load_settings(cli.data_dir).chat_model == ""
    assert installed(cli) == [str(tiny_model_dir.resolve())]  # the folder chosen with `use` stays listed
    code, _, err = cli("models", "remove", "tiny-4bit")
    assert code == 1 and "No installed model" in err


def test_a_folder_chosen_with_use_is_listed_and_remove_only_forgets_it(cli, tiny_model_dir, tmp_path):
    folder = tmp_path / "my-model"
    shutil.copytree(tiny_model_dir, folder)
    before = folder_digest(folder)
    assert cli("models", "use", str(folder))[0] == 0
    code, out, _ = cli("models", "list")
    assert code == 0 and "No model is installed yet" not in out
    assert "my-model" in out and str(folder) in out
    row = next(r for r in json.loads(cli("models", "list", "--json")[1])["models"] if r["name"] == "my-model")
    assert row["active"] and row["installed"] and row["source"] == "folder" and row["path"] == str(folder)
    code, out, err = cli("models", "remove", str(folder))
    assert code == 0, err
    assert "files are left" in out and folder_digest(folder) == before  # Engram never deletes a user's folder
    assert str(folder) not in installed(cli)


def test_use_of_a_missing_path_names_the_path_not_a_download(cli, tmp_path):
    for ref in ("/nonexistent", str(tmp_path / "gone"), "./not-here", "~/no-such-model-folder"):
        code, out, err = cli("models", "use", ref)
        assert code == 1 and "no folder" in err.lower() and "download" not in err, err
    code, _, err = cli("models", "use", "Qwen3-4B-4bit")  # a curated name: downloading is the right advice
    assert code == 1 and "engram models download Qwen3-4B-4bit" in err


def test_bad_models_give_clear_errors_and_change_nothing(cli, tiny_model_dir, tmp_path):
    assert cli("models", "download", REPO, "--yes")[0] == 0
    model_dir = cli.data_dir / "models" / "tiny-org--tiny-4bit"
    before = folder_digest(model_dir)
    settings_before = (cli.data_dir / "settings.json").read_bytes()

    not_a_model = tmp_path / "photos"
    not_a_model.mkdir()
    (not_a_model / "cat.jpg").write_bytes(b"\xff\xd8")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes((tiny_model_dir / "model.safetensors").read_bytes()[:5000])
    alien = tmp_path / "alien"
    shutil.copytree(tiny_model_dir, alien)
    config = json.loads((alien / "config.json").read_text())
    (alien / "config.json").write_text(json.dumps({**config, "model_type": "quantum_brain"}))
    cases = [(not_a_model, "not a model folder"), (corrupt, "damaged or incomplete"), (alien, "not supported"),
             (tmp_path / "nowhere", "There is no folder"), ("mlx-community/not-here", "not installed")]
    for folder, message in cases:
        code, _, err = cli("models", "use", str(folder))
        assert code == 1 and message in err, (folder, err)

    cli.ram["bytes"] = 64 * 1024  # a machine far too small for even the tiny model
    code, _, err = cli("models", "use", str(tiny_model_dir))
    assert code == 1 and "needs about" in err

    cli.ram["bytes"] = 16 * GB
    cli.hubs["tiny-org/flaky"] = FakeHub(tiny_model_dir, "tiny-org/flaky", fail_after_files=2)
    code, _, err = cli("models", "download", "tiny-org/flaky", "--yes")
    assert code == 1 and "stopped before it finished" in err and "nothing was installed" in err

    assert installed(cli) == [REPO]
    assert folder_digest(model_dir) == before
    assert (cli.data_dir / "settings.json").read_bytes() == settings_before

    cli.hubs["tiny-org/flaky"].fail_after_files = None  # the connection is back: running it again completes it
    assert cli("models", "download", "tiny-org/flaky", "--yes")[0] == 0
    assert sorted(installed(cli)) == sorted([REPO, "tiny-org/flaky"])


def test_ctrl_c_stops_a_download_cleanly_and_download_again_resumes(cli, tiny_model_dir):
    gate = threading.Event()
    hub = FakeHub(tiny_model_dir, gate=gate, chunk_size=1024)

    def interrupted(signum, frame):  # Python's own handler, plus: the hub goes on only once the main thread has it
        threading.Timer(0.5, gate.set).start()
        signal.default_int_handler(signum, frame)

    class Interrupted(FakeHub):  # the user presses Ctrl-C as the first file starts, as the terminal would send it
        def chunks(self, *args):
            if not hub.requests:
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            return hub.chunks(*args)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        cli.hubs[REPO] = Interrupted(tiny_model_dir)
        code, out, err = cli("models", "download", REPO, "--yes")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130 and "nothing is installed yet" in err and "Traceback" not in err
    assert f"engram models download {REPO}" in err and "resume" in err
    assert installed(cli) == [] and load_settings(cli.data_dir).chat_model == ""
    staging = cli.data_dir / "models" / STAGING / "tiny-org--tiny-4bit"
    kept = sum(p.stat().st_size for p in staging.iterdir() if not p.name.startswith("."))
    assert 0 < kept == hub.served_bytes
    code, out, err = cli("models", "download", REPO, "--yes")  # again: it continues where it stopped
    assert code == 0, err
    assert hub.served_bytes == hub.total_bytes() and installed(cli) == [REPO]
    assert not staging.exists()


def test_remove_throws_away_an_unfinished_download(cli, tiny_model_dir):
    cli.hubs["tiny-org/flaky"] = FakeHub(tiny_model_dir, "tiny-org/flaky", fail_after_files=2)
    code, _, err = cli("models", "download", "tiny-org/flaky", "--yes")
    assert code == 1 and "Run the download again to resume" in err
    staging = cli.data_dir / "models" / STAGING / "tiny-org--flaky"
    assert staging.is_dir()
    code, out, err = cli("models", "remove", "tiny-org/flaky")
    assert code == 0 and "Removed the unfinished download of tiny-org/flaky" in out, err
    assert not staging.exists() and (cli.data_dir / "models").is_dir()
    code, _, err = cli("models", "remove", "tiny-org/flaky")  # nothing left: the usual answer
    assert code == 1 and "No installed model" in err
    code, _, err = cli("models", "remove", "..")
    assert code == 1 and (cli.data_dir / "models").is_dir()


def test_a_dropped_connection_is_retried_and_said_so(cli, tiny_model_dir):
    cli.hubs[REPO] = FakeHub(tiny_model_dir, flaky=2)
    code, out, err = cli("models", "download", REPO, "--yes")
    assert code == 0, err
    assert "The connection dropped; trying again in 1 s." in err and "trying again in 2 s." in err
    assert installed(cli) == [REPO]
