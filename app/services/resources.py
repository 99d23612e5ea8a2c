"""One way to find Engram's resource files (icons, texts), from a source checkout and from a frozen build.

PyInstaller unpacks data next to the executable and records the folder in `sys._MEIPASS`; the spec in
packaging/ copies resources/ there under the same name, so both cases resolve to `<base>/resources/...`.
"""
from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from pathlib import Path

from core.errors import NotFound

APP_ICON = "engram.png"
VERSION_FILE = "engram-version.txt"  # written into the bundle's resources by packaging/engram.spec


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def resources_root() -> Path:
    if is_frozen():
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def resource_path(*parts: str) -> Path:
    """The path of a resource file; NotFound (with the folder searched) when it is missing."""
    if not parts or any(part in ("", ".", "..") or "/" in part or "\\" in part for part in parts):
        raise NotFound(f"not a resource name: {'/'.join(parts)!r}")
    path = resources_root().joinpath(*parts)
    if not path.exists():
        raise NotFound(f"resource {'/'.join(parts)} is missing from {resources_root()}")
    return path


def engram_version() -> str:
    """The installed package's version; from a checkout, pyproject.toml's; in a bundle, the file the spec wrote."""
    try:
        return importlib.metadata.version("engram")
    except importlib.metadata.PackageNotFoundError:
        pass
    if is_frozen():
        path = resources_root() / VERSION_FILE
        return path.read_text(encoding="utf-8").strip() if path.is_file() else "unknown"
    pyproject = resources_root().parent / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, KeyError, ValueError):
        return "unknown"
