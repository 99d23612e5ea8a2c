"""The command line: one argparse tree; each command group lives in its own module.

A group module exposes `register(subparsers)`; each subcommand sets `func(args, services) -> int`.
Imports of heavy runtimes happen inside the commands, so `engram --help` is instant.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Any, Sequence

from app.cli_types import EngramParser, UsageError

# Command groups, by module; a module missing here simply adds no commands.
COMMAND_MODULES = ("app.cli_memory", "app.cli_models", "app.cli_chat", "app.cli_jobs", "app.cli_learning",
                   "app.cli_doctor")


def build_parser() -> argparse.ArgumentParser:
    parser = EngramParser(prog="engram", description="Engram: a local assistant that remembers you.")
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
    """Run one command. Whatever goes wrong ends in one `engram: …` line and a non-zero exit, never a traceback
    (ENGRAM_DEBUG=1 shows it), and what the command prints is escaped for the terminal (app.terminal)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except UsageError as exc:
        from app.terminal import printable
        print(f"engram: {printable(str(exc).removeprefix('engram: '), one_line=True)}", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from app.terminal import SafeStream
    services = None
    stdout, sys.stdout = sys.stdout, SafeStream(sys.stdout)
    try:
        from app.services import Services
        services = Services.from_args(args)
        return int(args.func(args, services) or 0)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one plain line
        if isinstance(exc, SystemExit):
            raise
        return _report(exc, services)
    finally:
        sys.stdout = stdout
        _close(services)


def _report(exc: BaseException, services: Any) -> int:
    from app.errors import describe
    from app.terminal import printable
    message, damaged = describe(exc, services.db_path if services is not None else None)
    if damaged and services is not None:
        from core.store import health
        health.mark_damaged(services.db_path, str(exc))
    print(f"engram: {printable(message, one_line=True)}", file=sys.stderr)
    if os.environ.get("ENGRAM_DEBUG"):
        traceback.print_exception(exc)
    return 1


def _close(services: Any) -> None:
    if services is None:
        return
    try:
        services.close()
    except Exception:  # noqa: BLE001 - closing after a failure must not hide the failure's message
        pass
