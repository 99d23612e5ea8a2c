"""Model installs and downloads against a local fake hub folder (no network), and bad model folders."""
from __future__ import annotations

import json
import struct
import shutil
import threading
from types import SimpleNamespace

import pytest

from core.errors import InvalidInput, ModelError
from models.chat import ChatEngine
from models.checks import check_model_folder
from models.download import STAGING, DownloadCancelled, ModelStore
from models.registry import GB
from hubfake import REPO, FakeHub


def installed_names(store):
    return [m.name for m in store.installed()]


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", total_ram=16 * GB, hub=FakeHub(tmp_path / "nothing"))


def test_download_reports_progress_and_installs(tmp_path, tiny_model_dir, tiny_engine):
    hub = FakeHub(tiny_model_dir)
    store = ModelStore(tmp_path / "models", total_ram=16 * GB, hub=hub)
    plan = store.plan(REPO)
    assert plan.total_bytes == sum(p.stat().st_size for p in tiny_model_dir.iterdir() if p.is_file())
    seen = []
    installed = store.download(REPO, progress=seen.append)
    assert seen[-1].done_bytes == seen[-1].total_bytes == plan.total_bytes
    assert all(p.bytes_per_second > 0 for p in seen)
    assert installed_names(store) == ["tiny-org--tiny-4bit"]
    assert store.resolve("tiny-4bit") == installed.path
    assert not (store.root / STAGING / "tiny-org--tiny-4bit").exists()
    engine = ChatEngine.load(installed.path, worker=tiny_engine.worker)  # it really loads
    engine.unload()
    with pytest.raises(ModelError, match="already installed"):
        store.download(REPO)
    store.remove("tiny-org/tiny-4bit")
    assert installed_names(store) == []


def test_interrupted_download_installs_nothing(tmp_path, tiny_model_dir):
    store = ModelStore(tmp_path / "models", total_ram=16 * GB, hub=FakeHub(tiny_model_dir, fail_after_files=2),
                       sleep=lambda seconds: None)
    with pytest.raises(ModelError, match="stopped before it finished"):
        store.download(REPO)
    assert installed_names(store) == []
    with pytest.raises(ModelError, match="not installed"):
        store.resolve(REPO)


def test_cancelled_download_installs_nothing_and_cleans_up(tmp_path, tiny_model_dir):
    store = ModelStore(tmp_path / "models", total_ram=16 * GB, hub=FakeHub(tiny_model_dir))
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DownloadCancelled):
        store.download(REPO, cancel=cancel)
    assert installed_names(store) == []
    assert not (store.root / STAGING / "tiny-org--tiny-4bit").exists()


def test_download_refused_without_disk_space(tmp_path, tiny_model_dir):
    store = ModelStore(tmp_path / "models", total_ram=16 * GB, hub=FakeHub(tiny_model_dir),
                       disk_usage=lambda path: SimpleNamespace(free=10))
    with pytest.raises(ModelError, match="disk space"):
        store.download(REPO)
    assert installed_names(store) == []


def test_download_refused_when_the_model_cannot_fit_in_memory(tmp_path, tiny_model_dir):
    hub = FakeHub(tiny_model_dir)
    store = ModelStore(tmp_path / "models", total_ram=1024, hub=hub)  # a machine with 1 KB of memory
    with pytest.raises(ModelError,
                       match="needs about .* GB of memory; Engram can give a model .* GB here. Choose a smaller"):
        store.download(REPO)
    assert installed_names(store) == [] and not (store.root / STAGING / "tiny-org--tiny-4bit").exists()


def test_unknown_repo_and_bad_repo_id(tmp_path, tiny_model_dir):
    store = ModelStore(tmp_path / "models", hub=FakeHub(tiny_model_dir), sleep=lambda seconds: None)
    with pytest.raises(ModelError, match="Cannot reach"):
        store.plan("tiny-org/missing")
    with pytest.raises(InvalidInput):
        store.plan("../etc")


def install_copy(store, source, repo_id="local/good"):
    staging = store.root / STAGING / "copy"
    shutil.copytree(source, staging)
    return store.install(staging, repo_id=repo_id)


def test_bad_folders_give_clear_errors_and_change_nothing(tmp_path, tiny_model_dir, store):
    install_copy(store, tiny_model_dir)
    before = installed_names(store)

    not_a_model = tmp_path / "photos"
    not_a_model.mkdir()
    (not_a_model / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(ModelError, match="not a model folder"):
        store.install(not_a_model, repo_id="x/photos")

    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_model_dir, corrupt)
    weights = corrupt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelError, match="damaged or incomplete"):
        store.install(corrupt, repo_id="x/corrupt")

    garbage = tmp_path / "garbage"
    shutil.copytree(tiny_model_dir, garbage)
    (garbage / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(ModelError, match="damaged or incomplete"):
        store.install(garbage, repo_id="x/garbage")

    lying = tmp_path / "lying"  # a header MLX trusts: 2**31 × 2**31 floats in no bytes crashed it when evaluated
    shutil.copytree(tiny_model_dir, lying)
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [2 ** 31, 2 ** 31],
                                                       "data_offsets": [0, 0]}}).encode()
    (lying / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ModelError, match="damaged or incomplete .*impossible shape"):
        store.install(lying, repo_id="x/lying")

    inflated = tmp_path / "inflated"  # one edited number: building 10**6 layers hung the loader, memory growing
    shutil.copytree(tiny_model_dir, inflated)
    config = json.loads((inflated / "config.json").read_text())
    (inflated / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10 ** 6}))
    with pytest.raises(ModelError, match="says 1000000 layers but its weights hold"):
        store.install(inflated, repo_id="x/inflated")

    alien = tmp_path / "alien"
    shutil.copytree(tiny_model_dir, alien)
    config = json.loads((alien / "config.json").read_text())
    config["model_type"] = "quantum_brain"
    (alien / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="not supported"):
        store.install(alien, repo_id="x/alien")

    too_big = ModelStore(store.root, total_ram=64 * 1024)  # a 64 kB machine: the tiny model cannot fit
    big = tmp_path / "big"
    shutil.copytree(tiny_model_dir, big)
    with pytest.raises(ModelError, match="needs about"):
        too_big.install(big, repo_id="x/big")

    assert installed_names(store) == before
    for folder in (corrupt, alien, big):
        assert not (folder / "engram-model.json").exists()


def test_engine_load_refuses_bad_folders(tmp_path, tiny_model_dir):
    with pytest.raises(ModelError, match="not a folder"):
        ChatEngine.load(tmp_path / "missing")
    with pytest.raises(ModelError, match="needs about"):
        ChatEngine.load(tiny_model_dir, total_ram=64 * 1024)
    assert check_model_folder(tiny_model_dir)["model_type"] == "qwen2"


def test_remove_unknown_model(store):
    with pytest.raises(ModelError, match="No installed model"):
        store.remove("nothing")


def test_a_model_already_in_the_hugging_face_cache_is_used_offline(tmp_path, tiny_model_dir, monkeypatch,
                                                                   tiny_engine):
    """The real huggingface_hub lookup, local files only, over a cache laid out as the hub leaves it."""
    from huggingface_hub import constants
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--mlx-community--Tiny-4bit"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(tiny_model_dir, repo / "snapshots" / commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    store = ModelStore(tmp_path / "models")  # nothing installed through Engram
    folder = store.resolve("mlx-community/Tiny-4bit")
    assert folder == repo / "snapshots" / commit
    engine = ChatEngine.load(folder, worker=tiny_engine.worker)
    try:
        assert engine.count_tokens("hello") > 0
    finally:
        engine.unload()
    with pytest.raises(ModelError, match="is not installed"):
        store.resolve("mlx-community/Not-Here-4bit")  # not cached either: a clear error, and no download
