"""packaging/macos_minimum.py (issue 36.3): the lowest macOS a bundle runs on, from its binaries' load commands as
`otool -l` prints them (recorded from the real macOS wheels: tests/data/otool/README.md), against Info.plist."""
from __future__ import annotations

import importlib.util
import plistlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).parent / "data" / "otool"
spec = importlib.util.spec_from_file_location("macos_minimum", ROOT / "packaging" / "macos_minimum.py")
macos_minimum = importlib.util.module_from_spec(spec)
sys.modules["macos_minimum"] = macos_minimum  # its dataclasses look their module up there
spec.loader.exec_module(macos_minimum)

MACHO_64 = b"\xcf\xfa\xed\xfe" + bytes(28)  # a little-endian 64-bit Mach-O header
UNIVERSAL = b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + bytes(24)  # a fat header with two architectures
JAVA_CLASS = b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + bytes(24)  # Java 8's class file shares the magic


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


@pytest.mark.parametrize("name, minimums", [
    ("mlx-0.32.4-macosx_14_0-core.so.txt", ["14.0"]),
    ("mlx-0.32.4-macosx_15_0-core.so.txt", ["15.0"]),
    ("sqlite_vec-0.1.9-vec0.dylib.txt", ["14.0"]),  # its wheel says macosx_11_0
    ("pyside6_essentials-6.11.3-universal2-QtCore.abi3.so.txt", ["15.0", "15.0"]),  # its wheel says macosx_13_0
    ("pyside6_essentials-6.11.3-universal2-QtCore.framework.txt", ["13.0", "13.0"]),
    ("shiboken6-6.11.3-universal2-libshiboken6.dylib.txt", ["15.0", "15.0"]),
    ("shiboken6-6.9.3-universal2-libshiboken6.dylib.txt", ["12.0", "12.0"]),
    # x86_64 with the older LC_VERSION_MIN_MACOSX, arm64 with LC_BUILD_VERSION; the linker's and the source's
    # `version` lines are not minimums
    ("pyinstaller-6.22.3-universal2-bootloader-runw.txt", ["10.13", "11.0"]),
])
def test_the_minimum_of_each_architecture_is_read_from_recorded_otool_output(name, minimums):
    assert macos_minimum.parse_minimums(recorded(name)) == minimums


def test_versions_compare_as_numbers_not_text():
    assert macos_minimum.version_tuple("10.13") < macos_minimum.version_tuple("11.0")
    assert macos_minimum.version_tuple("15.0") > macos_minimum.version_tuple("14.6.1")


def fake_bundle(tmp_path: Path, declared: str) -> Path:
    """An Engram.app with three libraries standing for the recorded ones, a link, a Java class and a text file."""
    app = tmp_path / "Engram.app"
    frameworks = app / "Contents" / "Frameworks"
    for relative, content in (("mlx/core.so", MACHO_64), ("sqlite_vec/vec0.dylib", MACHO_64),
                              ("PySide6/QtCore.abi3.so", UNIVERSAL), ("lib/Example.class", JAVA_CLASS),
                              ("base_library.txt", b"not a binary")):
        (frameworks / relative).parent.mkdir(parents=True, exist_ok=True)
        (frameworks / relative).write_bytes(content)
    (frameworks / "QtCore.abi3.so").symlink_to(frameworks / "PySide6" / "QtCore.abi3.so")
    with (app / "Contents" / "Info.plist").open("wb") as file:
        plistlib.dump({"CFBundleName": "Engram", "LSMinimumSystemVersion": declared}, file)
    return app


RECORDING_OF = {"core.so": "mlx-0.32.4-macosx_14_0-core.so.txt", "vec0.dylib": "sqlite_vec-0.1.9-vec0.dylib.txt",
                "QtCore.abi3.so": "pyside6_essentials-6.11.3-universal2-QtCore.abi3.so.txt"}


def recorded_otool(seen: list[str]):
    def run(command: list[str]) -> str:
        assert command[:2] == ["otool", "-l"]
        seen.append(Path(command[-1]).name)
        return recorded(RECORDING_OF[Path(command[-1]).name])
    return run


def test_a_bundle_declaring_less_than_its_binaries_need_fails_naming_them(tmp_path):
    seen: list[str] = []
    passes, line = macos_minimum.check_bundle(fake_bundle(tmp_path, "14.0"), recorded_otool(seen))
    assert not passes
    assert line.startswith("FAIL the bundle needs macOS 15.0 (Contents/Frameworks/PySide6/QtCore.abi3.so); "
                           "Info.plist says 14.0")
    assert sorted(seen) == ["QtCore.abi3.so", "core.so", "vec0.dylib"]  # the link, the class, the text: not read


def test_a_bundle_declaring_what_its_binaries_need_passes(tmp_path):
    passes, line = macos_minimum.check_bundle(fake_bundle(tmp_path, "15.0"), recorded_otool([]))
    assert passes and line.startswith("OK the bundle needs macOS 15.0")


@dataclass
class FakeDistribution:
    """What installed_above reads of an importlib.metadata distribution."""
    name: str
    version: str
    folder: Path
    files: list[str]

    @property
    def metadata(self) -> dict:
        return {"Name": self.name}

    def locate_file(self, entry: str) -> Path:
        return self.folder / entry


def test_installed_packages_built_for_a_later_macos_are_listed_for_reinstalling(tmp_path):
    for relative in ("mlx/core.so", "sqlite_vec/vec0.dylib", "mlx/__init__.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(b"" if relative.endswith(".py") else MACHO_64)
    distributions = [FakeDistribution("mlx", "0.32.4", tmp_path, ["mlx/core.so", "mlx/__init__.py"]),
                     FakeDistribution("sqlite-vec", "0.1.9", tmp_path, ["sqlite_vec/vec0.dylib"])]
    recordings = {"core.so": "mlx-0.32.4-macosx_15_0-core.so.txt", "vec0.dylib": "sqlite_vec-0.1.9-vec0.dylib.txt"}

    def run(command: list[str]) -> str:
        return recorded(recordings[Path(command[-1]).name])
    assert macos_minimum.installed_above("14.0", run, distributions) == ["mlx==0.32.4"]
    assert macos_minimum.installed_above("15.0", run, distributions) == []


def test_the_spec_declares_the_minimum_the_pinned_wheels_need():
    """PySide6 6.10+ bindings need 15.0 (recorded above); pyproject admits 6.11, so the spec must say 15.0."""
    text = (ROOT / "packaging" / "engram.spec").read_text()
    declared = re.search(r'^MACOS_MINIMUM = "([\d.]+)"', text, re.M).group(1)
    assert '"LSMinimumSystemVersion": MACOS_MINIMUM' in text
    needed = max((v for name in RECORDING_OF.values() for v in macos_minimum.parse_minimums(recorded(name))),
                 key=macos_minimum.version_tuple)
    assert declared == needed == "15.0"


def test_without_otool_the_check_fails_in_one_line_instead_of_passing(tmp_path, monkeypatch, capsys):
    app = fake_bundle(tmp_path, "15.0")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # as on Linux: no otool at all
    assert macos_minimum.main([str(app)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("macos_minimum: FAIL") and "otool" in err[0]
