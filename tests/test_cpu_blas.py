"""MLX's float32 matmul on an optimized BLAS (models.cpu_blas), each side in its own process: once libmlx is loaded,
its BLAS is bound."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="macOS runs MLX on Accelerate/Metal")

PROBE = """
import json, sys, time
from models.cpu_blas import preload_fast_blas
loaded = preload_fast_blas() if sys.argv[1] == "fast" else None
import mlx.core as mx
a = mx.random.normal((384, 576), key=mx.random.key(1)); b = mx.random.normal((576, 1536), key=mx.random.key(2))
mx.eval(a @ b)
start = time.perf_counter()
for _ in range(5):
    c = a @ b
    mx.eval(c)
seconds = (time.perf_counter() - start) / 5
late = preload_fast_blas()  # mlx is loaded now: too late, and it says so by finding nothing
print(json.dumps({"loaded": str(loaded) if loaded else None, "late": late, "seconds": seconds,
                  "checksum": float(mx.sum(c * c).item()), "corner": c[:2, :3].reshape(-1).tolist()}))
"""


def _probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_float32_matmul_runs_on_the_fast_blas_with_the_same_result():
    reference, fast = _probe("reference"), _probe("fast")
    if not fast["loaded"]:
        pytest.skip("no optimized OpenBLAS on this machine (faiss-cpu's wheel, Linux only, or libopenblas0)")
    print(f"reference BLAS {reference['seconds'] * 1e3:.1f} ms, fast {fast['seconds'] * 1e3:.1f} ms")
    assert fast["loaded"] and "openblas" in fast["loaded"]  # the test extra installs one (faiss-cpu's)
    assert reference["late"] is None and fast["late"] is None
    assert fast["corner"] == pytest.approx(reference["corner"], rel=1e-4, abs=1e-4)
    assert fast["checksum"] == pytest.approx(reference["checksum"], rel=1e-4)
    assert reference["seconds"] / fast["seconds"] > 3  # same run, same machine: measured ~50× here
