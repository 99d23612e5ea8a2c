"""mlx-lm imports a model's module by name (`mlx_lm.models.<model_type>`) when it loads: collect them all."""
from PyInstaller.utils.hooks import collect_data_files, collect_submodules

# the server, evaluation and conversion front ends pull in web and dataset stacks the app does not use
_UNUSED = ("mlx_lm.server", "mlx_lm.evaluate", "mlx_lm.examples", "mlx_lm.share", "mlx_lm.upload")

hiddenimports = collect_submodules("mlx_lm", filter=lambda name: not name.startswith(_UNUSED))
datas = collect_data_files("mlx_lm")
