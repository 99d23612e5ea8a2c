"""A local stand-in for huggingface_hub.snapshot_download: serves one repo from a folder, never the network.

Shared by the download, Models-panel and `engram models` tests. It lists files for a dry run, copies them with
byte progress through the given tqdm class, and can drop the connection halfway through a file or hold each
file until a gate opens (to test cancel).
"""
from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

REPO = "tiny-org/tiny-4bit"


@dataclass
class FakeHub:
    source: Path
    repo_id: str = REPO
    fail_after_files: int | None = None  # copy this many files, then half of the next, then fail
    gate: threading.Event | None = None  # when set, each file waits for it (up to 10 s)
    calls: int = 0

    def __call__(self, repo_id, *, allow_patterns=None, dry_run=False, local_dir=None, tqdm_class=None,
                 local_files_only=False, **_):
        self.calls += 1
        if repo_id != self.repo_id:
            raise FileNotFoundError(f"404 {repo_id}")
        if local_files_only:
            raise FileNotFoundError("not in cache")
        files = sorted(p for p in Path(self.source).iterdir() if p.is_file())
        if dry_run:
            return [SimpleNamespace(filename=p.name, file_size=p.stat().st_size, will_download=True) for p in files]
        bar = tqdm_class(total=sum(p.stat().st_size for p in files), initial=0, unit="B", unit_scale=True,
                         desc="Reconstructing")
        for index, path in enumerate(files):
            if self.gate is not None:
                self.gate.wait(10)
            if self.fail_after_files is not None and index >= self.fail_after_files:
                data = path.read_bytes()
                (Path(local_dir) / path.name).write_bytes(data[: len(data) // 2])
                raise ConnectionError("connection reset by peer")
            shutil.copy(path, Path(local_dir) / path.name)
            bar.update(path.stat().st_size)
        bar.close()
        return str(local_dir)
