"""llguidance: the Rust core plus the numpy and mlx adapters (imported lazily), and its package metadata, which
its __init__ reads for __version__."""
from PyInstaller.utils.hooks import collect_submodules, copy_metadata

hiddenimports = collect_submodules("llguidance", filter=lambda name: not name.endswith(".torch"))
datas = copy_metadata("llguidance")
