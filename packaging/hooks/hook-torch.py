"""torch, for the sentence-transformers embedder (CPU inference): replaces the contributed hook to leave out
torch's C++ test binaries, headers and build tools (about 200 MB the app never runs).

Every torch submodule stays: torch imports many of them at start-up, some by name (torch._dynamo.polyfills,
torch.testing._internal through torch.utils.checkpoint), and TorchScript reads Python sources at run time.
"""
from pathlib import Path

from PyInstaller import compat
from PyInstaller.utils.hooks import PY_DYLIB_PATTERNS, collect_data_files, collect_dynamic_libs, \
    collect_submodules, get_package_paths

module_collection_mode = "pyz+py"
warn_on_missing_hiddenimports = False

_, _torch_dir = get_package_paths("torch")
_UNUSED_DATA = ["**/*.h", "**/*.hpp", "**/*.cuh", "**/*.lib", "**/*.cpp", "**/*.pyi", "**/*.cmake",
                "include/**", "test/**", "bin/**", "share/**", "lib/*test*", "lib/libaoti_custom_ops*"]

hiddenimports = collect_submodules("torch", filter=lambda name: not name.startswith(
    ("torch.utils.tensorboard", "torch.utils.benchmark", "torch.testing._internal.opinfo",
     "torch.testing._internal.optests", "torch.testing._internal.generated")))
datas = collect_data_files("torch", excludes=_UNUSED_DATA)
binaries = [(src, dest) for src, dest in collect_dynamic_libs("torch", search_patterns=PY_DYLIB_PATTERNS + ["*.so.*"])
            if "test" not in Path(src).name and "aoti_custom_ops" not in Path(src).name]
# torch starts this helper for shared-memory tensors; `import torch` fails without it
binaries.append((str(Path(_torch_dir) / "bin" / "torch_shm_manager"), "torch/bin"))
excludedimports = ["tensorboard", "triton"]
if compat.is_linux:
    bindepend_symlink_suppression = ["**/torch/lib/*.so*"]
