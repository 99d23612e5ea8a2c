"""sentence-transformers builds a model from modules.json, importing each module class by name."""
from PyInstaller.utils.hooks import collect_data_files, collect_submodules

hiddenimports = collect_submodules("sentence_transformers.models")
datas = collect_data_files("sentence_transformers")
