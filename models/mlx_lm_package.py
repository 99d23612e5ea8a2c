"""mlx-lm's model code without its package's __init__, which imports transformers (0.7–1.0 s of a cold start).

`import mlx_lm.models.qwen2` runs mlx_lm/__init__.py first, and that imports convert, generate and utils, which
import transformers — though the model, cache and sampling modules themselves need only mlx. `install()` puts
the package module in sys.modules built from its spec but not executed, with a module `__getattr__` (PEP 562)
that runs the real __init__ the first time someone asks for a name that __init__ defines: `from mlx_lm import
load` (LoRA, fusing, the training worker) works unchanged, just later. Submodules import as usual.
"""
from __future__ import annotations

import dis
import importlib.util
import sys
import threading
from types import CodeType, ModuleType
from typing import Any, Callable

PACKAGE = "mlx_lm"


def install() -> ModuleType:
    """The `mlx_lm` package module, registered unexecuted unless it is imported already (then left as it is)."""
    present = sys.modules.get(PACKAGE)
    if present is not None:
        return present
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None:
        raise ImportError(f"{PACKAGE} is not installed")
    module = importlib.util.module_from_spec(spec)  # sets __path__, so submodules resolve
    loader: Any = spec.loader  # a source loader, or a PyInstaller bundle's frozen importer: both have get_code
    code = loader.get_code(PACKAGE)
    module.__dict__["__getattr__"] = _run_init_on_demand(module, code, init_names(code))
    sys.modules[PACKAGE] = module
    return module


def keep_torch_out() -> None:
    """For a worker process that reads models with MLX only: transformers (which mlx-lm's loader and tuner import)
    imports torch wherever the `st` extra installed it, ~2.3 s of CPU per process start for nothing. With this the
    worker runs as on an install without that extra: transformers sees no torch. A process that loaded torch
    already keeps it."""
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # None: `import torch` fails, find_spec is None


def is_deferred(module: ModuleType) -> bool:
    """True while the package's __init__ has not run (for tests and diagnostics)."""
    return "__getattr__" in vars(module)


def init_names(code: CodeType) -> frozenset[str]:
    """The module-level names a module's code binds (`from .utils import load` binds `load`)."""
    stores = ("STORE_NAME", "STORE_GLOBAL")
    return frozenset(ins.argval for ins in dis.get_instructions(code) if ins.opname in stores)


def _run_init_on_demand(module: ModuleType, code: CodeType, names: frozenset[str]) -> Callable[[str], Any]:
    lock = threading.Lock()  # two threads asking at once must not run the __init__ twice

    def __getattr__(name: str) -> Any:
        if name not in names:  # a submodule not imported yet, or a name the package has not
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        with lock:
            if vars(module).get("__getattr__") is __getattr__:
                exec(code, vars(module))  # what the import system would have run; failures propagate
                del module.__getattr__
        if name not in vars(module):  # bound only on a branch the __init__ did not take
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        return vars(module)[name]

    return __getattr__
