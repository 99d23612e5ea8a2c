"""Curated 4-bit MLX chat models from mlx-community, and whether each fits this machine's memory.

Sizes are the download size of the repo's weights and tokenizer; RAM need adds the KV cache and runtime
for a few thousand tokens of context. On Apple Silicon the GPU shares the machine's RAM, and macOS lets it
use roughly three quarters of it, hence the thresholds below.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

GB = 1024 ** 3
FITS, TIGHT, WONT_FIT = "fits", "tight", "won't fit"
FITS_SHARE = 0.5  # at most half the RAM: the rest of the Mac stays responsive
TIGHT_SHARE = 0.75  # about what macOS lets the GPU wire by default


@dataclass(frozen=True)
class ModelInfo:
    repo_id: str
    family: str
    params_b: float
    size_bytes: int
    context_length: int
    ram_bytes: int  # estimated peak while chatting

    @property
    def name(self) -> str:
        return self.repo_id.rsplit("/", 1)[-1]


def _info(repo_id: str, family: str, params_b: float, size_gb: float, context: int) -> ModelInfo:
    size = int(size_gb * GB)
    return ModelInfo(repo_id, family, params_b, size, context, ram_estimate(size))


def ram_estimate(weights_bytes: int) -> int:
    """Weights plus ~20% for activations and KV cache, plus half a gigabyte of runtime."""
    return int(weights_bytes * 1.2 + 0.5 * GB)


# Repo ids confirmed on huggingface.co/mlx-community; sizes rounded up from the repos' file listings.
CURATED: tuple[ModelInfo, ...] = (
    _info("mlx-community/Qwen3-0.6B-4bit", "Qwen3", 0.6, 0.36, 32768),
    _info("mlx-community/gemma-3-1b-it-4bit", "Gemma 3", 1.0, 0.78, 32768),
    _info("mlx-community/Llama-3.2-1B-Instruct-4bit", "Llama 3.2", 1.2, 0.72, 131072),
    _info("mlx-community/Llama-3.2-3B-Instruct-4bit", "Llama 3.2", 3.2, 1.85, 131072),
    _info("mlx-community/Qwen3-4B-4bit", "Qwen3", 4.0, 2.3, 32768),
    _info("mlx-community/gemma-3-4b-it-4bit-DWQ", "Gemma 3", 4.3, 2.6, 131072),
    _info("mlx-community/Qwen3-8B-4bit", "Qwen3", 8.2, 4.65, 32768),
)

# Best first: the default is the first of these that fits.
DEFAULT_PREFERENCE = (
    "mlx-community/Qwen3-8B-4bit",
    "mlx-community/Qwen3-4B-4bit",
    "mlx-community/Llama-3.2-3B-Instruct-4bit",
    "mlx-community/Llama-3.2-1B-Instruct-4bit",
    "mlx-community/Qwen3-0.6B-4bit",
)


def find_model(name_or_repo: str, catalog: Sequence[ModelInfo] = CURATED) -> ModelInfo | None:
    wanted = name_or_repo.lower()
    for info in catalog:
        if wanted in (info.repo_id.lower(), info.name.lower()):
            return info
    return None


def fit(ram_needed: int, total_ram: int) -> str:
    if total_ram <= 0:
        return TIGHT  # unknown memory: neither promise nor refuse
    if ram_needed <= total_ram * FITS_SHARE:
        return FITS
    if ram_needed <= total_ram * TIGHT_SHARE:
        return TIGHT
    return WONT_FIT


def default_model(total_ram: int, catalog: Sequence[ModelInfo] = CURATED) -> ModelInfo:
    """The best preferred model that fits comfortably; the smallest model when none does."""
    for repo_id in DEFAULT_PREFERENCE:
        info = find_model(repo_id, catalog)
        if info is not None and fit(info.ram_bytes, total_ram) == FITS:
            return info
    return min(catalog, key=lambda info: info.ram_bytes)


def parse_meminfo(text: str) -> int:
    """Bytes of MemTotal in Linux /proc/meminfo text (reported there in kB); 0 if absent."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            unit = fields[2].lower() if len(fields) > 2 else "kb"
            return int(fields[1]) * (1024 if unit == "kb" else 1)
    return 0


def parse_sysctl_memsize(text: str) -> int:
    """Bytes from `sysctl hw.memsize` output, with or without the `hw.memsize:` prefix; 0 if unreadable."""
    value = text.strip().rsplit(":", 1)[-1].strip()
    return int(value) if value.isdigit() else 0


def total_ram_bytes(platform: str | None = None, *, meminfo: Path = Path("/proc/meminfo"),
                    run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> int:
    """This machine's physical memory in bytes; 0 when it cannot be read."""
    platform = sys.platform if platform is None else platform
    try:
        if platform == "darwin":
            done = run(["sysctl", "-n", "hw.memsize"], capture_output=True, text=True, timeout=5, check=False)
            return parse_sysctl_memsize(done.stdout)
        return parse_meminfo(meminfo.read_text(encoding="ascii", errors="replace"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def folder_weights_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))
