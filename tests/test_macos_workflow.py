"""The Mac release workflow (.github/workflows/macos.yml) as GitHub would run it (issue 36): a live Apple Silicon
runner image, strict signing verified, the .dmg made with retries, the bundle's minimum macOS derived and checked,
the real window opened and photographed, an mlx escape hatch that cannot install a pair that does not fit; and
actionlint passes on it where it is installed (the `lint` extra)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "macos.yml"
RETIRED = {"macos-10.15", "macos-11", "macos-12", "macos-13", "macos-14"}  # macos-14: retired 2026-11-02
APPLE_SILICON = {"macos-15", "macos-15-xlarge", "macos-26", "macos-26-xlarge", "macos-latest", "macos-latest-xlarge"}
# The first major of each action that runs on Node 24 (Node 20 left GitHub's runners in September 2026)
NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 5}


@pytest.fixture(scope="module")
def job() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["app"]


def steps_running(job: dict, text: str) -> list[int]:
    return [i for i, step in enumerate(job["steps"]) if text in step.get("run", "")]


def the_step(job: dict, text: str) -> tuple[int, dict]:
    found = steps_running(job, text)
    assert len(found) == 1, f"{len(found)} steps run {text!r}"
    return found[0], job["steps"][found[0]]


def test_every_runner_is_a_live_apple_silicon_image(job):
    runners = job["strategy"]["matrix"]["runner"]
    assert job["runs-on"] == "${{ matrix.runner }}"
    assert runners and not set(runners) & RETIRED and set(runners) <= APPLE_SILICON
    assert "macos-26" in runners  # the newest image beside macos-15


def test_the_actions_run_on_node_24(job):
    for step in job["steps"]:
        if "uses" in step:
            name, major = step["uses"].split("@v")
            assert int(major) >= NODE24_MAJORS[name], step["uses"]


def test_signing_failures_fail_the_build_and_the_signature_is_verified(job):
    build, step = the_step(job, "pyinstaller packaging/engram.spec")
    assert step["env"]["PYINSTALLER_STRICT_BUNDLE_CODESIGN_ERROR"] == "1"
    assert step["env"]["PYINSTALLER_VERIFY_BUNDLE_SIGNATURE"] == "1"
    verify, _ = the_step(job, "codesign --verify --deep --strict")
    assert verify > build


def test_a_notarized_build_is_assessed_as_a_quarantined_download(job):
    _, step = the_step(job, "xattr -w com.apple.quarantine")
    assert "HAS_NOTARY" in step["if"]
    run = step["run"]
    assert run.index("xattr -w com.apple.quarantine") < run.index("spctl --assess --type execute")


def test_the_dmg_is_made_by_the_script_that_retries_hdiutil(job):
    the_step(job, "packaging/make_dmg.sh dist")
    script = (ROOT / "packaging" / "make_dmg.sh").read_text()
    loop = script[script.index("for attempt in"):script.index("done", script.index("for attempt in"))]
    assert "hdiutil create" in loop and 'ATTEMPTS="${DMG_ATTEMPTS:-5}"' in script  # tests/test_make_dmg.py runs it


def test_the_minimum_macos_is_derived_from_the_bundle_and_matches_the_spec(job):
    build, _ = the_step(job, "pyinstaller packaging/engram.spec")
    check, step = the_step(job, "packaging/macos_minimum.py dist/Engram.app")
    assert check > build and "LSMinimumSystemVersion" in step["run"]
    spec = (ROOT / "packaging" / "engram.spec").read_text()
    assert job["env"]["MACOS_MINIMUM"] == re.search(r'^MACOS_MINIMUM = "([\d.]+)"', spec, re.M).group(1)
    _, wheels = the_step(job, "--installed-above")  # the wheels built for that macOS, on a newer runner too
    assert 'macosx_${MACOS_MINIMUM/./_}_arm64' in wheels["run"]


def test_the_window_is_opened_on_the_screen_photographed_and_uploaded(job):
    build, _ = the_step(job, "pyinstaller packaging/engram.spec")
    smoke, step = the_step(job, "--smoke")
    assert smoke > build
    assert "env -u QT_QPA_PLATFORM dist/Engram.app/Contents/MacOS/engram --smoke" in step["run"]
    assert "screencapture" in step["run"] and 'exit "$status"' in step["run"]
    upload = job["steps"][smoke + 1]
    assert upload["uses"].startswith("actions/upload-artifact") and upload["with"]["path"] == "smoke-*.png"
    assert upload["if"] == "always()"


def test_the_mlx_escape_hatch_installs_mlx_metal_and_a_fitting_mlx_lm_together(job):
    _, step = the_step(job, '"mlx==$MLX_VERSION"')
    assert step["env"]["MLX_VERSION"] == "${{ inputs.mlx_version }}"  # through the environment, not the script
    pinned = next(line for line in step["run"].splitlines() if '"mlx==$MLX_VERSION"' in line)
    assert '"mlx-metal==$MLX_VERSION"' in pinned
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    mlx_lm = next(d for d in dependencies if d.startswith("mlx-lm"))
    assert f'"{mlx_lm}"' in pinned
    checked = step["run"].index(".venv/bin/pip check")
    assert step["run"].index(pinned) < checked and 'grep -iE "(^| )mlx"' in step["run"][checked:]


def actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    return str(beside) if beside.exists() else shutil.which("actionlint")


def test_actionlint_passes_on_the_workflow():
    binary = actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed (the `lint` extra: pip install -e '.[lint]')")
    done = subprocess.run([binary, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
