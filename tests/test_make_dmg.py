"""packaging/make_dmg.sh retries `hdiutil create`, which fails at random with "Resource busy" on GitHub's macOS
runners (issue 36.7), a bounded number of times. Run here with stand-ins for the macOS tools on PATH."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Fails while fewer than $HDIUTIL_FAILS calls were made, then writes the image (its last argument).
HDIUTIL = """#!/usr/bin/env bash
echo call >> "$HDIUTIL_CALLS"
if [[ $(wc -l < "$HDIUTIL_CALLS") -le $HDIUTIL_FAILS ]]; then
  echo "hdiutil: create failed - Resource busy" >&2
  exit 1
fi
echo image > "${@: -1}"
"""
TOOLS = {"hdiutil": HDIUTIL, "ditto": '#!/usr/bin/env bash\ncp -R "$1" "$2"\n',
         "PlistBuddy": "#!/usr/bin/env bash\necho 0.1.0\n"}


def make_dmg(tmp_path: Path, fails: int) -> tuple[subprocess.CompletedProcess, int]:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, script in TOOLS.items():
        (tools / name).write_text(script)
        (tools / name).chmod(0o755)
    (tmp_path / "dist" / "Engram.app" / "Contents").mkdir(parents=True)
    calls = tmp_path / "calls"
    calls.touch()
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PLISTBUDDY": str(tools / "PlistBuddy"),
           "HDIUTIL_CALLS": str(calls), "HDIUTIL_FAILS": str(fails), "DMG_RETRY_SECONDS": "0"}
    done = subprocess.run(["bash", str(ROOT / "packaging" / "make_dmg.sh"), str(tmp_path / "dist")], env=env,
                          capture_output=True, text=True, timeout=60)
    return done, len(calls.read_text().splitlines())


def test_a_busy_resource_is_retried_until_the_image_is_made(tmp_path):
    done, calls = make_dmg(tmp_path, fails=2)
    assert done.returncode == 0, done.stderr
    assert calls == 3 and (tmp_path / "dist" / "Engram-0.1.0.dmg").read_text() == "image\n"
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / "dist" / "Engram-0.1.0.dmg")
    assert "attempt 1 of 5" in done.stderr and "attempt 2 of 5" in done.stderr


def test_it_gives_up_after_a_bounded_number_of_attempts(tmp_path):
    done, calls = make_dmg(tmp_path, fails=100)
    assert done.returncode == 1 and calls == 5
    assert done.stderr.strip().splitlines()[-1] == "make_dmg: hdiutil create failed 5 times (last status 1)"
    assert not (tmp_path / "dist" / "Engram-0.1.0.dmg").exists()
