"""Files Engram writes outside the store (exports, adapters): whole or not at all, and readable by the user alone."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from core.errors import InvalidInput


def write_private_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk, then rename it over `path` (0600).

    A failure (a full disk, a kill) leaves whatever `path` held before. `path` must be a regular file or not exist:
    renaming over a device or a folder would replace it."""
    if path.exists() and not path.is_file():
        raise InvalidInput(f"{path} is not a regular file; Engram writes exports only to files")
    if not path.parent.is_dir():
        raise InvalidInput(f"the folder {path.parent} does not exist")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename is durable only once the folder's entry is on disk too."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
