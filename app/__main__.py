"""`engram`: with no arguments the desktop app starts; with a subcommand, the command line runs."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        from app.gui import run_gui  # deferred: Qt loads only when the window is wanted
        return run_gui()
    from app.cli import run_cli
    return run_cli(argv)


if __name__ == "__main__":
    sys.exit(main())
