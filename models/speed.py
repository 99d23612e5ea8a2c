"""How fast this machine answers: a quick probe, cached, and the tokens per second it means for each model.

Writing a reply reads every weight of the model once per token, so a model's pace is about the memory bandwidth the
model's runtime gets divided by the bytes of its weights. The probe measures that bandwidth the way a reply uses it
— MLX multiplying a 64 MB matrix by a vector on its default device (the GPU on a Mac, the CPU here) —
for well under a second, once; the figure is cached in the data folder with the machine and MLX version it was
measured on, so a new machine or MLX measures again. Fit (models.registry) says whether a model can run; this says
whether it answers at a readable pace (READABLE tokens per second).
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

CACHE_FILE = "machine-speed.json"
READABLE = 8.0  # tokens per second: about as fast as a person reads
EFFICIENCY = 0.6  # a token reads the weights plus the cache and runs the sampler: the probe's pace is a ceiling
PROBE_SIDE = 4096  # a 4096 x 4096 float32 matrix: 64 MB, past the CPU caches
PROBE_ROUNDS = 8


@dataclass(frozen=True)
class MachineSpeed:
    bytes_per_second: float  # weights read per second while writing a reply
    machine: str  # what it was measured on

    @property
    def on_cpu(self) -> bool:
        return "cpu" in self.machine.rsplit(" on ", 1)[-1].lower()  # the device machine_key names last

    def tokens_per_second(self, weight_bytes: int) -> Optional[float]:
        """Estimated reply pace for a model of this many weight bytes (None for an unknown size)."""
        if weight_bytes <= 0 or self.bytes_per_second <= 0:
            return None
        return EFFICIENCY * self.bytes_per_second / weight_bytes

    def model_pace(self, info: object) -> Optional[float]:
        """A curated model's pace here: on a CPU the chat engine reads float32 copies of its weights
        (models/cpu_weights.py), four bytes a parameter; on a GPU its quantized file as it is."""
        params = float(getattr(info, "params_b", 0.0) or 0.0)
        weight_bytes = int(params * 4e9) if self.on_cpu and params else int(getattr(info, "size_bytes", 0) or 0)
        return self.tokens_per_second(weight_bytes)


def machine_key() -> str:
    """Names the machine and its MLX without importing MLX (a window asks this while it opens): the installed
    version from its metadata, and the device MLX runs on here (Metal on a Mac, the CPU elsewhere)."""
    import importlib.metadata
    try:
        version = importlib.metadata.version("mlx")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    device = "gpu" if sys.platform == "darwin" else "cpu"
    return f"{platform.system()} {platform.machine()} {os.cpu_count()} cpus, mlx {version} on {device}"


def probe_bandwidth(rounds: int = PROBE_ROUNDS, side: int = PROBE_SIDE) -> float:
    """Bytes of weights MLX reads per second in a float32 matrix-vector product on its default device (with the
    BLAS the chat engine gets on a Linux CPU)."""
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # before MLX loads, as the chat engine does; no effect once it has
    import mlx.core as mx
    matrix = mx.random.normal((side, side))
    vector = mx.random.normal((side,))
    mx.eval(matrix, vector, matrix @ vector)  # the first run compiles and pages the matrix in
    started = time.perf_counter()
    for _ in range(rounds):
        vector = (matrix @ vector) / side
        mx.eval(vector)
    seconds = max(time.perf_counter() - started, 1e-9)
    return rounds * side * side * 4 / seconds


def machine_speed(data_dir: Path, *, probe: Optional[Callable[[], float]] = None,
                  key: Optional[Callable[[], str]] = None, measure: bool = True) -> Optional[MachineSpeed]:
    """The cached figure for this machine, measured now when there is none (None when it cannot be measured, or
    is not cached and `measure` is off: a window opening does not wait for MLX to load)."""
    probe, key = probe or probe_bandwidth, key or machine_key  # looked up now: a test may have replaced them
    path, here = Path(data_dir) / CACHE_FILE, key()
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("machine") == here and float(cached["bytes_per_second"]) > 0:
            return MachineSpeed(float(cached["bytes_per_second"]), here)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not measured yet here, or a damaged cache: measure again
    if not measure:
        return None
    try:
        speed = MachineSpeed(float(probe()), here)
    except Exception:  # noqa: BLE001 - no MLX or no device: the recommendation falls back to fit alone
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"machine": here, "bytes_per_second": speed.bytes_per_second,
                                    "measured_at": time.time()}), encoding="utf-8")
    except OSError:
        pass  # a read-only folder: measured again next time
    return speed


def speed_words(tokens_per_second: Optional[float]) -> str:
    """"≈ 12 tok/s" as LM Studio users read it; "" when unknown."""
    if tokens_per_second is None:
        return ""
    return f"≈ {tokens_per_second:.0f} tok/s" if tokens_per_second >= 1 else f"≈ {tokens_per_second:.1f} tok/s"
