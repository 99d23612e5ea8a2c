"""House rules that code can check: core/ stays plain Python."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = {"PySide6", "pyqtgraph", "mlx", "mlx_lm", "torch", "sentence_transformers",
                     "transformers", "app", "models"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_core_imports_no_runtime_or_ui():
    offences = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for lineno, name in _imports(path):
            if name.split(".")[0] in FORBIDDEN_IN_CORE:
                offences.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
    assert not offences, "core/ must stay plain Python:\n" + "\n".join(offences)


def test_the_check_sees_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import json\nfrom mlx_lm import load\nimport PySide6.QtCore\n")
    names = {name.split(".")[0] for _, name in _imports(bad)}
    assert {"mlx_lm", "PySide6"} <= names & FORBIDDEN_IN_CORE


def test_models_never_import_app():
    offences = []
    for path in sorted((ROOT / "models").rglob("*.py")):
        offences += [f"{path.name}:{n}" for n, name in _imports(path) if name.split(".")[0] == "app"]
    assert not offences
