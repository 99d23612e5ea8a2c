# For mypy only (pyproject's [tool.mypy] mypy_path): apsw as Any. Its own stubs type every column of a row as
# int | float | bytes | str | None, while the schema (core/store/migrations.py) fixes each column's type: 63 of
# mypy's first 141 findings in core/ were a row's value used as the type its column holds, none of them a bug.
from typing import Any

def __getattr__(name: str) -> Any: ...
