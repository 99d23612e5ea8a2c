"""`engram`: with no arguments the desktop app starts; with a subcommand, the command line runs."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # before anything imports mlx (Linux: MLX's CPU wheel links a slow reference BLAS)
    if not argv:
        from app.ui.main_window import launch  # deferred: Qt loads only when the window is wanted
        return launch()
    if argv[0] == "-m" and getattr(sys, "frozen", False):
        return _run_bundled_module(argv[1:])
    from app.cli.main import run_cli  # the commands, and --self-check and --screenshots, which `engram --help` lists
    return run_cli(argv)


# A frozen build has no `python`; subprocesses that run `python -m` (the fine-tune, GGUF and install-check workers)
# run these.
BUNDLED_MODULES = ("models.train_worker", "models.gguf_worker", "models.speech_check")


def _run_bundled_module(argv: list[str]) -> int:
    import runpy
    if not argv or argv[0] not in BUNDLED_MODULES:
        print(f"engram: -m runs only {', '.join(BUNDLED_MODULES)}", file=sys.stderr)
        return 2
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
