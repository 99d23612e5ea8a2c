"""CI runs the linter and type checker (issue 41), the README's test command exactly, the fuzz tests at their full
example counts, then the Mac-shaped lane (issue 36), and fails if any pass fails."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests import mac_shaped

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```bash\n(python3 -m venv .venv && .*pytest -q[^\n]*)\n```", text).group(1)


def test_ci_runs_the_readme_command_then_the_mac_shaped_lane():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    main = lines.index(readme_test_command())
    lane = next(i for i, line in enumerate(lines) if "pytest -q --mac-shaped" in line)
    assert main < lane
    assert all(path.is_file() for path in map(Path, mac_shaped.lane_paths(ROOT))), "a lane file is missing"


def test_ci_runs_ruff_and_mypy_before_the_tests():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    lint = next(i for i, line in enumerate(lines) if "-m ruff check core models" in line and "-m mypy" in line)
    assert lint < lines.index(readme_test_command())


def run_ci_with(tmp_path, main_exit: int, lane_exit: int, lint_exit: int = 0, fuzz_exit: int = 0) -> int:
    """.ci/run in a copy whose python3 and .venv are stand-ins returning the given exit codes."""
    tmp_path.mkdir()
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text(encoding="utf-8"), encoding="utf-8")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "pip").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "python").write_text(f'#!/bin/sh\ncase "$*" in *--mac-shaped*) exit {lane_exit};; '
                                    f"*ruff*|*mypy*) exit {lint_exit};; *thorough*) exit {fuzz_exit};; "
                                    f"esac\nexit {main_exit}\n")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nexit 0\n")
    for script in (bin_dir / "pip", bin_dir / "python", fake / "python3"):
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=env, capture_output=True, timeout=60).returncode


def test_ci_fails_when_either_pass_fails_and_when_the_lane_collects_nothing(tmp_path):
    assert run_ci_with(tmp_path / "a", 0, 0) == 0
    assert run_ci_with(tmp_path / "b", 1, 0) == 1
    assert run_ci_with(tmp_path / "c", 0, 1) == 1
    assert run_ci_with(tmp_path / "d", 0, 5) == 5  # no tests collected
    assert run_ci_with(tmp_path / "e", 0, 0, lint_exit=1) == 1  # a lint or type finding
    assert run_ci_with(tmp_path / "f", 0, 0, fuzz_exit=1) == 1  # a fuzz case at the full example count


def test_ci_runs_the_fuzz_tests_at_their_full_example_counts():
    """The default run draws a quarter of each fuzz test's examples (tests/fuzzkit.py); CI runs them all."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    fuzz = next(i for i, line in enumerate(lines) if "--hypothesis-profile=thorough" in line)
    assert lines.index(readme_test_command()) < fuzz
    named = " ".join(lines[fuzz:fuzz + 2])
    assert "tests/test_fuzz_cli.py" in named and "tests/test_fuzz_api.py" in named
