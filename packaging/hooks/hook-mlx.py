"""mlx: the compiled core, libmlx and (on macOS) mlx.metallib, kept together in mlx/lib.

mlx looks for mlx.metallib next to the libmlx it was loaded from; the spec also links the metallib beside any
top-level copy of libmlx that PyInstaller's dependency analysis creates.
"""
from pathlib import Path

from PyInstaller.utils.hooks import collect_submodules, get_package_paths

_, package_dir = get_package_paths("mlx")
lib_dir = Path(package_dir) / "lib"

hiddenimports = ["mlx._reprlib_fix", "mlx.__array_api_info", *collect_submodules("mlx.nn"),
                 *collect_submodules("mlx.optimizers"), "mlx.utils"]
binaries = [(str(path), "mlx/lib") for path in lib_dir.glob("libmlx*")]
datas = [(str(path), "mlx/lib") for path in lib_dir.glob("*.metallib")]
# headers, cmake files and the distributed-launch helpers are for building extensions, not for running
excludedimports = ["mlx._distributed_utils"]
