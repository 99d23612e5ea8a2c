"""The lowest macOS that Engram.app runs on, read from its Mach-O files' load commands (issue 36.3).

A wheel's platform tag is not a promise: sqlite-vec's says macosx_11_0 and its vec0.dylib is built for 14.0;
PySide6 6.11's says macosx_13_0 and its bindings are built for 15.0. What counts is each binary's LC_BUILD_VERSION
`minos` (LC_VERSION_MIN_MACOSX `version` in older ones), which `otool -l` prints. On a Mac (Xcode's tools):

    python packaging/macos_minimum.py dist/Engram.app        # fails if Info.plist's LSMinimumSystemVersion is lower
    python packaging/macos_minimum.py --installed-above 15.0 # name==version of installed packages built for later

The second form lists what to reinstall from wheels for that macOS (a newer runner's pip picks newer wheels).
Parsing is plain Python, tested on Linux with recorded output (tests/test_macos_minimum.py).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import plistlib
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

MACHO_MAGICS = {b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"}
FAT_MAGICS = {b"\xca\xfe\xba\xbe", b"\xbe\xba\xfe\xca"}  # universal binaries (0xcafebabe is a Java class too)
# The field holding the minimum macOS, by load command
MINIMUM_FIELD = {"LC_BUILD_VERSION": "minos", "LC_VERSION_MIN_MACOSX": "version"}
Run = Callable[[list[str]], str]


def version_tuple(text: str) -> tuple[int, ...]:
    """'14.0' → (14, 0); '10.13.2' → (10, 13, 2)."""
    return tuple(int(part) for part in text.split("."))


def parse_minimums(otool_output: str) -> list[str]:
    """Every minimum macOS in `otool -l` output (each architecture of a universal file, each command)."""
    found, command = [], None
    for line in otool_output.splitlines():
        words = line.split()
        if line.startswith("Load command") or line.rstrip().endswith(":"):
            command = None  # a new command, or a new file or architecture
        elif len(words) == 2 and words[0] == "cmd":
            command = words[1]
        elif len(words) == 2 and words[0] == MINIMUM_FIELD.get(command) and re.fullmatch(r"\d+(\.\d+)*", words[1]):
            found.append(words[1])
    return found


def is_macho(path: Path) -> bool:
    """A Mach-O file or a universal one (a fat header counts a few architectures; a Java class's version is 45+)."""
    try:
        with path.open("rb") as file:
            head = file.read(8)
    except OSError:
        return False
    if head[:4] in MACHO_MAGICS:
        return True
    return head[:4] in FAT_MAGICS and 0 < int.from_bytes(head[4:8], "big" if head[0] == 0xCA else "little") < 40


def run_tool(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def binary_minimum(path: Path, run: Run = run_tool) -> str | None:
    minimums = parse_minimums(run(["otool", "-l", str(path)]))
    return max(minimums, key=version_tuple) if minimums else None


@dataclass
class Minimum:
    """The highest minimum among some binaries, and which of them need it."""
    version: str = "0.0"
    needed_by: list[Path] = field(default_factory=list)

    def add(self, path: Path, version: str | None) -> None:
        if version is None:
            return
        if version_tuple(version) > version_tuple(self.version):
            self.version, self.needed_by = version, [path]
        elif version_tuple(version) == version_tuple(self.version):
            self.needed_by.append(path)


def machos(paths: Iterable[Path]) -> list[Path]:
    """The Mach-O files among `paths`; a symlink is read where it points, once."""
    return sorted(path for path in paths if path.is_file() and not path.is_symlink() and is_macho(path))


def bundle_minimum(folder: Path, run: Run = run_tool) -> Minimum:
    minimum = Minimum()
    for path in machos(folder.rglob("*")):
        minimum.add(path.relative_to(folder), binary_minimum(path, run))
    return minimum


def plist_minimum(app: Path) -> str:
    with (app / "Contents" / "Info.plist").open("rb") as file:
        return str(plistlib.load(file).get("LSMinimumSystemVersion", "0.0"))


def check_bundle(app: Path, run: Run = run_tool) -> tuple[bool, str]:
    """(passes, one line): the bundle's true minimum against the one Info.plist declares."""
    needed, declared = bundle_minimum(app, run), plist_minimum(app)
    examples = ", ".join(str(path) for path in needed.needed_by[:3])
    more = f" and {len(needed.needed_by) - 3} more" if len(needed.needed_by) > 3 else ""
    line = f"the bundle needs macOS {needed.version} ({examples}{more}); Info.plist says {declared}"
    if version_tuple(declared) < version_tuple(needed.version):
        return False, f"FAIL {line}: raise LSMinimumSystemVersion in packaging/engram.spec, or bundle older builds"
    return True, f"OK {line}"


def installed_above(target: str, run: Run = run_tool,
                    distributions: Iterable[importlib.metadata.Distribution] | None = None) -> list[str]:
    """name==version of each installed distribution with a binary built for a macOS later than `target`."""
    too_new = []
    for dist in importlib.metadata.distributions() if distributions is None else distributions:
        files = [Path(dist.locate_file(entry)) for entry in dist.files or ()]
        versions = [binary_minimum(path, run) for path in machos(files)]
        if any(v and version_tuple(v) > version_tuple(target) for v in versions):
            too_new.append(f"{dist.metadata['Name']}=={dist.version}")
    return sorted(set(too_new))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", nargs="?", type=Path, help="the .app whose Info.plist is checked")
    parser.add_argument("--installed-above", metavar="VERSION",
                        help="list installed packages with binaries built for a macOS later than VERSION")
    args = parser.parse_args(argv)
    if args.app is None and not args.installed_above:
        parser.error("give the .app, or --installed-above VERSION")
    try:
        if args.installed_above:
            print("\n".join(installed_above(args.installed_above)))
            return 0
        passes, line = check_bundle(args.app)
    except (OSError, subprocess.CalledProcessError) as exc:  # no otool, or a binary it cannot read: unproven
        if isinstance(exc, subprocess.CalledProcessError):
            exc = f"{' '.join(map(str, exc.cmd))}: {(exc.stderr or '').strip() or f'status {exc.returncode}'}"
        print(f"macos_minimum: FAIL the minimum cannot be read: {exc}", file=sys.stderr)
        return 1
    print(f"macos_minimum: {line}")
    return 0 if passes else 1


if __name__ == "__main__":
    sys.exit(main())
