"""The Mac-shaped lane (`pytest --mac-shaped`, the second pass of .ci/run): this Linux machine set up to take the
paths a Mac takes, as far as it can without Metal (issue 36).

- Quantized layers are kept (ENGRAM_KEEP_QUANTIZED, models/cpu_weights.py): chat, scoring and LoRA run through
  QuantizedLinear and QuantizedEmbedding. The variable reaches the fine-tune's worker process too.
- The mlx.nn embedder is the default backend (models/bert_embedder.default_backend answers "mlx", as on Metal).
- onnxruntime and faiss cannot be imported (None in sys.modules: an import fails, find_spec answers None).
- threadpoolctl sees no BLAS (numpy's Accelerate build on a Mac shows none).
- Every mlx.core call off the test's thread and the MLX workers fails (models/mlx_guard.py), as MLX on a Mac must
  never be used from two threads.
- The probes that read sys.platform (app/services/platform.py, models/budget.py, models/registry.py) see "darwin",
  and the commands and MLX call they make answer with output recorded on a 16 GB M1 MacBook on AC power.

What fails here fails on a Mac; what passes still needs the macOS runner (.github/workflows/macos.yml).
Applied once, in pytest_configure, before any test module imports the product's modules: the probes bind
`subprocess.run` as a default argument when they are imported.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

OPTION = "--mac-shaped"
GUARD = pytest.StashKey()
HIDDEN_MODULES = ("onnxruntime", "faiss")
PLATFORM_MODULES = ("app.services.platform", "models.budget", "models.registry")

# Recorded on an Apple M1 MacBook Air with 16 GB, macOS 15 (mlx 0.32's mx.device_info(), ioreg, pmset, sysctl).
M1_16GB_DEVICE_INFO = {"architecture": "applegpu_g13g", "device_name": "Apple M1", "max_buffer_length": 8589934592,
                       "max_recommended_working_set_size": 11453251584, "memory_size": 17179869184,
                       "resource_limit": 499000}
RECORDED_COMMANDS = {
    ("sysctl", "-n", "hw.memsize"): "17179869184\n",
    ("ioreg", "-c", "IOHIDSystem"): ('+-o IOHIDSystem  <class IOHIDSystem, id 0x100000452, registered, matched, '
                                     'active, busy 0 (0 ms), retain 31>\n    {\n      "HIDIdleTime" = 734000000000\n'
                                     '    }\n'),
    ("pmset", "-g", "batt"): ("Now drawing from 'AC Power'\n -InternalBattery-0 (id=4653155)\t100%; charged; "
                              "0:00 remaining present: true\n"),
}

# What the lane runs: the model, embedding, fine-tune and self-check tests (about three minutes here).
LANE_TESTS = (
    "tests/test_mlx_owner.py",
    "tests/test_models_worker.py",
    "tests/test_embeddings.py",
    "tests/test_bert_threads.py",
    "tests/test_finetune_memory.py",
    "tests/test_ci_lanes.py",
    "tests/integration/test_quantized_path.py",
    "tests/test_embed_cache.py",
    "tests/test_registry_fit.py",
    "tests/test_finetune.py",
    "tests/test_scoring.py",
    "tests/test_selfcheck.py",
    "tests/test_idle_power.py",
    "tests/test_power_assertion.py",
    "tests/integration/test_mlx_chat.py",
    "tests/integration/test_generation.py",
    "tests/integration/test_mlx_lora.py",
    "tests/integration/test_adapter_in_chat.py",
    "tests/integration/test_mlx_structured.py",
    "tests/integration/test_finetune_e2e.py",
    "tests/integration/test_token_ids.py",
)


# Left out of the lane, each for its reason: what a Mac does not have, or minutes that test nothing Mac-shaped.
LEFT_OUT = {
    "tests/test_embeddings.py::test_a_lasting_process_embeds_through_onnxruntime_where_it_is_installed":
        "which encoder a Linux process picks; the lane makes mlx.nn the default, as a Mac's is",
    "tests/integration/test_generation.py::test_the_real_models_greedy_reply_is_mlx_lms":
        "the float32 SmolLM2 against mlx-lm (50 s): no quantized or Mac path in it",
    "tests/integration/test_mlx_structured.py::test_fifty_generations_are_all_valid":
        "fifty sampled generations (45 s): the lane's other structured tests run the same path",
    **{f"tests/integration/test_finetune_e2e.py::{name}": "the job's stop and cleanup logic, which the main suite "
       "covers; the lane keeps the fine-tunes that train, score and resume on the quantized model"
       for name in ("test_the_user_coming_back_while_the_adapter_is_scored_stops_the_scoring",
                    "test_forget_everything_while_the_new_adapter_is_scored_keeps_nothing_it_learned",
                    "test_cancelling_a_running_fine_tune_removes_its_run",
                    "test_a_killed_training_process_leaves_the_previous_adapter_and_store")},
}


def apply(config: Any) -> None:
    """Make this process (and the worker processes it starts) take a Mac's paths; see the module's docstring."""
    from models.cpu_weights import KEEP_QUANTIZED
    os.environ[KEEP_QUANTIZED] = "1"
    for name in HIDDEN_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]
    _hide_blas_from_threadpoolctl()
    _answer_recorded_commands()
    import mlx.core as mx
    mx.device_info = lambda: dict(M1_16GB_DEVICE_INFO)
    import models.bert_embedder as bert_embedder
    bert_embedder.default_backend = lambda lasting=False: "mlx"
    for name in PLATFORM_MODULES:
        __import__(name)
        sys.modules[name].sys = _Darwin()
    from models.mlx_guard import MLXThreadGuard
    config.stash[GUARD] = MLXThreadGuard(allowed=_may_use_mlx).__enter__()


def guard_report(config: Any) -> list[str]:
    """MLX calls the lane saw on a thread other than the test's own and the MLX workers (pytest_sessionfinish)."""
    guard = config.stash.get(GUARD, None)
    return [] if guard is None else list(guard.violations)


def _may_use_mlx(thread: threading.Thread) -> bool:
    """The test's own thread (tests build and probe models directly) and the app's MLX workers (models/worker.py)."""
    return thread is threading.main_thread() or thread.name.startswith("engram-mlx")


def lane_paths(root: Path) -> list[str]:
    return [str(root / path) for path in LANE_TESTS]


def leave_out(config: Any, items: list) -> None:
    """Deselect LEFT_OUT from the collected items (pytest_collection_modifyitems)."""
    kept = [item for item in items if item.nodeid not in LEFT_OUT]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in LEFT_OUT])
        items[:] = kept


class _Darwin(ModuleType):
    """`sys` as a probe module sees it on a Mac: platform "darwin", everything else the real sys."""

    def __init__(self) -> None:
        super().__init__("sys")

    platform = "darwin"

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)


def _hide_blas_from_threadpoolctl() -> None:
    import threadpoolctl
    original = threadpoolctl.ThreadpoolController.__init__

    def without_blas(self: Any) -> None:
        original(self)
        self.lib_controllers = [lib for lib in self.lib_controllers if lib.user_api != "blas"]

    threadpoolctl.ThreadpoolController.__init__ = without_blas


def _answer_recorded_commands() -> None:
    real_run = subprocess.run

    def run(argv: Any, *args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        recorded = RECORDED_COMMANDS.get(tuple(argv)) if isinstance(argv, (list, tuple)) else None
        if recorded is None:
            return real_run(argv, *args, **kwargs)
        text = kwargs.get("text") or kwargs.get("universal_newlines")
        return subprocess.CompletedProcess(argv, 0, recorded if text else recorded.encode(), "" if text else b"")

    subprocess.run = run
