"""One file's pages in the kernel's page cache: evicted (posix_fadvise DONTNEED: that file only, no root, nobody
else's cache touched) and counted (mincore over a read-only map of it). bench/cold.py uses both to say how much of
the store each verb reads, readahead included, and how long the verb takes when none of the store is cached."""
from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

PAGE = mmap.PAGESIZE


def evict(path: Path) -> bool:
    """Drop `path`'s clean pages from the page cache (its dirty ones are written first). False where the platform
    has no posix_fadvise (macOS)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def resident_bytes(path: Path) -> int | None:
    """How many bytes of `path` the page cache holds now (None where mincore cannot be called)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                              ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            pages = (size + PAGE - 1) // PAGE
            vector = ctypes.create_string_buffer(pages)
            if libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                return None
            return sum(byte & 1 for byte in vector.raw) * PAGE
        finally:
            libc.munmap(ctypes.c_void_p(address), size)
    finally:
        os.close(fd)
