"""How much memory a model may use on this machine: the budget every fit verdict is measured against.

On a Mac the GPU shares the machine's RAM but Metal recommends a working set below it (about two thirds to three
quarters): MLX's `device_info()` reports it, and a model past it swaps or fails. Elsewhere MLX runs on the CPU, so
the budget is the memory available now. The macOS-only call sits behind `device_info`, passed in so tests use
recorded dicts.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

GB = 1024 ** 3
GPU_WORKING_SET = "gpu"  # Metal's recommended working set (a Mac with MLX's GPU)
TOTAL_RAM = "total"  # a Mac whose MLX does not report it: its physical memory
AVAILABLE_RAM = "available"  # Linux and other CPU-only machines: memory free now
WORKING_SET_KEY = "max_recommended_working_set_size"


@dataclass(frozen=True)
class MemoryBudget:
    bytes: int  # 0 when it could not be read
    source: str  # GPU_WORKING_SET, TOTAL_RAM or AVAILABLE_RAM


def parse_device_info(info: dict) -> int:
    """Metal's recommended working set in bytes from an `mx.device_info()` dict; 0 when it holds none."""
    value = info.get(WORKING_SET_KEY) if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def device_info(mx: Any = None) -> dict:
    """MLX's device description: `mx.device_info()` in newer mlx, `mx.metal.device_info()` in older; {} if neither."""
    if mx is None:
        import mlx.core as mx  # deferred: only the Mac path reads the GPU
    for owner in (mx, getattr(mx, "metal", None)):
        read = getattr(owner, "device_info", None)
        if read is None:
            continue
        try:
            info = read()
        except Exception:  # no Metal device, or an mlx whose call changed: fall back to memory
            continue
        if isinstance(info, dict) and info:
            return info
    return {}


def parse_meminfo_available(text: str) -> int:
    """Bytes of MemAvailable in Linux /proc/meminfo text (the kernel's estimate of what can be used without
    swapping); 0 if absent."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            return int(fields[1]) * 1024 if len(fields) > 1 and fields[1].isdigit() else 0
    return 0


def memory_budget(platform: str | None = None, *, device_info: Callable[[], dict] = device_info,
                  meminfo: Path = Path("/proc/meminfo"),
                  run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> MemoryBudget:
    """What a model may use here: the GPU's working set on a Mac, else memory (see the module's docstring)."""
    platform = sys.platform if platform is None else platform
    if platform == "darwin":
        working_set = parse_device_info(device_info())
        if working_set:
            return MemoryBudget(working_set, GPU_WORKING_SET)
        from models.registry import total_ram_bytes
        return MemoryBudget(total_ram_bytes("darwin", run=run), TOTAL_RAM)
    try:
        return MemoryBudget(parse_meminfo_available(meminfo.read_text(encoding="ascii", errors="replace")),
                            AVAILABLE_RAM)
    except OSError:
        return MemoryBudget(0, AVAILABLE_RAM)


def budget_words(budget: MemoryBudget, machine: str) -> str:
    """The budget in words for the screen, e.g. "what the GPU may use, 10.7 GB of this Mac's memory"."""
    size = f"{budget.bytes / GB:.1f} GB"
    if budget.source == GPU_WORKING_SET:
        return f"what the GPU may use, {size} of {machine}'s memory"
    if budget.source == AVAILABLE_RAM:
        return f"{size} free of {machine}'s memory"
    return f"{size} of {machine}'s memory"
