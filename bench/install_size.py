"""What a plain install costs: `python -m bench.install_size [--ref REF ...]`.

For each git ref (default HEAD), that commit's tree is exported into a temporary folder and installed the README's
way, `python3 -m venv .venv && .venv/bin/pip install -e .` (no extras), with pip's cache off (a new machine has
none). Reported per ref: the install's wall time, the size on disk of the venv's site-packages, the number of
distributions installed, the largest ones, and whether torch or sentence-transformers came with it. Refs are measured
one after another in one run, so a baseline (e.g. the commit before a dependency change) shares the machine's load.
The target: no torch in a plain install (issue 41.7); the exit status is 1 when the last ref misses it. Prints
JSON; --out saves it (bench/results/install.json). The header's uncommitted_source_files are the checkout's the
bench ran from: each install is of its ref's committed tree.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sentence-transformers", "sentence_transformers")
# The venv's distributions, name → bytes of the files their RECORD lists (the editable project itself is tiny).
INVENTORY = """
import importlib.metadata as md, json, os
sizes = {}
for dist in md.distributions():
    total = 0
    for file in dist.files or []:
        try:
            total += os.path.getsize(file.locate())
        except OSError:
            pass
    sizes[dist.metadata["Name"]] = total
print(json.dumps(sizes))
"""


def export(ref: str, into: Path) -> str:
    """The tree of `ref` in `into`; its short commit hash."""
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, check=True,
                             capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def measure(ref: str, python: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="engram-install-") as scratch:
        source = Path(scratch) / "engram"
        commit = export(ref, source)
        venv = source / ".venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = venv / "bin" / "pip"
        started = time.perf_counter()
        done = subprocess.run([str(pip), "install", "-q", "--no-cache-dir", "-e", "."], cwd=source,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            return {"ref": ref, "commit": commit, "error": done.stderr.strip().splitlines()[-1:]}
        site = next((venv / "lib").glob("python3*/site-packages"))
        sizes = json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", INVENTORY], check=True,
                                          capture_output=True, text=True).stdout)
        imports_torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"],
                                       capture_output=True).returncode == 0
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:8]
        heavy = sorted(name for name in sizes if name.lower() in HEAVY)
        return {"ref": ref, "commit": commit, "install_seconds": round(seconds, 1),
                "site_packages_mb": round(folder_bytes(site) / 1e6, 1), "distributions": len(sizes),
                "largest_mb": {name: round(size / 1e6, 1) for name, size in largest},
                "heavy_installed": heavy, "import_torch_works": imports_torch,
                "verdict": "pass" if not heavy and not imports_torch else "fail"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", action="append", help="a git ref to install (repeatable; default HEAD)")
    parser.add_argument("--python", default=shutil.which("python3") or sys.executable,
                        help="the interpreter that makes the venv (the README's python3)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    from bench.meta import stamp
    result = {**stamp("install_size"), "command": "python3 -m venv .venv && .venv/bin/pip install -e .",
              "target": "no torch or sentence-transformers in a plain install",
              "runs": [measure(ref, args.python) for ref in args.ref or ["HEAD"]]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if all(run.get("verdict") == "pass" for run in result["runs"][-1:]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
