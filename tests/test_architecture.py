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


def _module_names() -> dict[str, Path]:
    names = {}
    for package in ("app", "core", "models"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            names[name.removesuffix(".__init__")] = path
    return names


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {sub.lineno for sub in ast.walk(node) if hasattr(sub, "lineno")}
    return lines


def import_graph() -> dict[str, set[str]]:
    """Every import between the project's modules, deferred ones (inside a function) included: a circle hidden in
    a function is still a circle. Imports for annotations only (`if TYPE_CHECKING:`) never run and do not count."""
    names = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skipped:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            graph[name] |= {target for target in targets if target in names and target != name}
    return graph


def test_no_import_circles():
    import networkx as nx
    circles = [" → ".join([*cycle, cycle[0]]) for cycle in nx.simple_cycles(nx.DiGraph(
        [(a, b) for a, targets in import_graph().items() for b in targets]))]
    assert not circles, "import circles:\n" + "\n".join(circles)
