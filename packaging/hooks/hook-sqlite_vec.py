"""sqlite-vec: its loadable extension (vec0.so / vec0.dylib) is loaded by path, so PyInstaller cannot see it."""
from PyInstaller.utils.hooks import collect_dynamic_libs

binaries = collect_dynamic_libs("sqlite_vec", destdir="sqlite_vec", search_patterns=["vec0.*"])
