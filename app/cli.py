"""The command line: one argparse tree; each command group lives in its own module.

A group module exposes `register(subparsers)`; each subcommand sets `func(args, services) -> int`.
Imports of heavy runtimes happen inside the commands, so `engram --help` is instant.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from core.errors import EngramError

# Command groups, by module; a module missing here simply adds no commands.
COMMAND_MODULES = ("app.cli_memory", "app.cli_models", "app.cli_chat", "app.cli_jobs", "app.cli_learning")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Engram: a local assistant that remembers you.")
    parser.add_argument("--data-dir", help="use this data folder instead of the default (or ENGRAM_HOME)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def run_cli(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from app.services import Services
    services = Services.from_args(args)
    try:
        return int(args.func(args, services) or 0)
    except EngramError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        services.close()
