"""The command line: one argparse tree; each command group lives in its own module.

A group module exposes `register(subparsers)`; each subcommand sets `func(args, services) -> int`. Parsing imports
no runtime (no MLX, torch, Hugging Face, Qt, numpy or SQLite: tests/test_cli_imports.py): a group module imports
what a command needs inside that command, so `engram --help` and a mistyped command line answer at once.

A group named without its action runs its listing (`engram memory` is `engram memory list`; BARE_ACTIONS).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from app.cli.arguments import EngramParser, UsageError

# Command groups, by module; a module missing here simply adds no commands.
COMMAND_MODULES = ("app.cli.memory", "app.cli.models", "app.cli.chat", "app.cli.jobs", "app.cli.finetune",
                   "app.cli.learning", "app.cli.recall_weights", "app.cli.doctor", "app.cli.importing",
                   "app.cli.serve")

# What a group does when it is named alone: its listing (or, for finetune, its status).
BARE_ACTIONS = {"memory": "list", "models": "list", "jobs": "list", "finetune": "status", "hypotheses": "list",
                "goals": "list"}

LOG_NAME = "cli-errors.log"  # in the data folder's logs/: the tracebacks of failures nobody foresaw
LOG_LIMIT = 1_000_000  # bytes; the log is rolled over to .1 past this


def build_parser() -> argparse.ArgumentParser:
    parser = EngramParser(
        prog="engram", description="Engram: a local assistant that remembers you.",
        epilog="With no arguments at all, `engram` opens the desktop app. `engram COMMAND --help` explains a "
               "command; a group named alone (`engram memory`) lists.")
    parser.add_argument("--data-dir", metavar="FOLDER",
                        help="use this data folder instead of the default (or ENGRAM_HOME)")
    parser.add_argument("--debug", action="store_true",
                        help="when something fails, print the full traceback too (or set ENGRAM_DEBUG=1)")
    parser.add_argument("--self-check", action="store_true",
                        help="check that this installation works, offline, on a temporary store, and exit")
    parser.add_argument("--screenshots", metavar="DIR",
                        help="save a picture of every panel into DIR (a sample data folder, or --data-dir) and exit")
    parser.add_argument("--smoke", nargs="?", type=float, const=0.0, metavar="SECONDS",
                        help="open the window on a temporary store, check it is on screen with its menus, keep it "
                             "SECONDS (for a screenshot), print OK or FAIL and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    _bare_groups_list(subparsers)
    _global_options_anywhere(subparsers)
    return parser


def _global_options_anywhere(subparsers: argparse._SubParsersAction) -> None:
    """`engram memory list --data-dir X` works as `engram --data-dir X memory list` does (the value given after the
    command wins; SUPPRESS leaves the one given before it in place when it is not repeated)."""
    for command in subparsers.choices.values():
        inner = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        for parser in [command, *(p for action in inner for p in action.choices.values())]:
            parser.add_argument("--data-dir", metavar="FOLDER", default=argparse.SUPPRESS,
                                help="use this data folder instead of the default (or ENGRAM_HOME)")
            parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                help="when something fails, print the full traceback too")


def _bare_groups_list(subparsers: argparse._SubParsersAction) -> None:
    """`engram memory` runs `engram memory list` (with that command's defaults), and so on for BARE_ACTIONS."""
    for group, verb in BARE_ACTIONS.items():
        group_parser = subparsers.choices.get(group)
        if group_parser is None:
            continue
        actions = [a for a in getattr(group_parser, "_actions", ()) if isinstance(a, argparse._SubParsersAction)]
        if not actions or verb not in actions[0].choices:
            continue
        actions[0].required = False
        group_parser.set_defaults(func=_bare(actions[0].choices[verb], actions[0].dest, verb))
        if not group_parser.epilog:
            group_parser.epilog = f"With no ACTION: `engram {group} {verb}`."


def _bare(verb_parser: argparse.ArgumentParser, dest: str, verb: str) -> Callable[[argparse.Namespace, Any], int]:
    def run(args: argparse.Namespace, services: Any) -> int:
        del args.func  # the verb's own defaults (func, --limit, --status, ...) fill the namespace
        verb_parser.parse_args([], namespace=args)
        setattr(args, dest, verb)
        return args.func(args, services)
    return run


def run_cli(argv: Sequence[str]) -> int:
    """Run one command. Whatever goes wrong ends in one `engram: …` line on standard error and a non-zero exit,
    never a traceback (`--debug` or ENGRAM_DEBUG=1 shows it), and what the command prints is escaped for the
    terminal (app.cli.terminal)."""
    argv = list(argv)
    debug = "--debug" in argv or bool(os.environ.get("ENGRAM_DEBUG"))
    services = None
    stdout = sys.stdout
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            return _say(str(exc).removeprefix("engram: ").removeprefix("engram "), 2)
        debug = debug or args.debug
        if args.self_check or args.screenshots is not None or args.smoke is not None:
            return _run_whole_app_check(args)
        if not getattr(args, "func", None):
            return _say("give a COMMAND (see `engram --help`); with no arguments at all, the desktop app opens", 2)
        from app.cli.terminal import SafeStream
        sys.stdout = SafeStream(stdout)
        from app.services.wiring import Services
        services = Services.from_args(args)
        return int(args.func(args, services) or 0)
    except KeyboardInterrupt:
        return _say("interrupted", 130)
    except BrokenPipeError:  # `engram memory list | head`: the reader left; nothing to say to it
        _quiet_stdout(stdout)
        return 141
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one plain line
        return _report(exc, services, debug)
    finally:
        sys.stdout = stdout
        _close(services)


def _run_whole_app_check(args: argparse.Namespace) -> int:
    if args.command:
        raise UsageError("--self-check, --smoke and --screenshots run alone, not with a command")
    if [args.self_check, args.screenshots is not None, args.smoke is not None].count(True) > 1:
        raise UsageError("--self-check, --smoke and --screenshots run one at a time")
    if args.smoke is not None:
        from app.ui.smoke import run_smoke  # the real window on this screen, checked, then closed
        return run_smoke(args.smoke)
    if args.self_check:
        from app.services.selfcheck import run_self_check  # proves an install or a bundle works, offline
        return run_self_check()
    from app.ui.screenshots import main as screenshots  # one PNG per panel on a seeded sample folder
    return screenshots([args.screenshots, *(["--data-dir", args.data_dir] if args.data_dir else [])])


def _say(message: str, code: int) -> int:
    from app.cli.terminal import printable
    print(f"engram: {printable(message, one_line=True)}", file=sys.stderr)
    return code


def _report(exc: BaseException, services: Any, debug: bool) -> int:
    from app.services.errors import DEBUG_HINT, describe
    if isinstance(exc, UsageError):
        return _say(str(exc), 2)
    message, damaged = describe(exc, services.db_path if services is not None else None)
    if damaged and services is not None:
        from core.store import health
        health.mark_damaged(services.db_path, str(exc))
    unforeseen = message.endswith(f"; {DEBUG_HINT}.")
    if unforeseen:
        log = _log_failure(exc, services)
        message = (message.removesuffix(f"; {DEBUG_HINT}.") + (f"; the details are in {log}" if log else "")
                   + ("" if debug else "; run it again with --debug to see them here"))
    code = _say(message, 1)
    if debug:
        import traceback
        traceback.print_exception(exc)
    return code


def _log_failure(exc: BaseException, services: Any) -> Path | None:
    """Append the traceback to the data folder's logs/cli-errors.log (0600); None when it cannot be written.

    Only the code's path and the exception's type: not its message nor the command line, which may hold the text
    of a memory (a purge must be able to erase every copy of it)."""
    import time
    import traceback
    folder = getattr(services, "data_dir", None)
    if folder is None or not Path(folder).is_dir():
        return None
    try:
        logs = Path(folder) / "logs"
        logs.mkdir(mode=0o700, exist_ok=True)
        path = logs / LOG_NAME
        if path.exists() and path.stat().st_size > LOG_LIMIT:
            path.replace(logs / f"{LOG_NAME}.1")
        stack = "".join(traceback.format_tb(exc.__traceback__))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {type(exc).__module__}.{type(exc).__qualname__}\n"
                      f"{stack}")
        return path
    except OSError:
        return None


def _quiet_stdout(stdout: Any) -> None:
    """After a broken pipe, point standard output at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass


def _close(services: Any) -> None:
    if services is None:
        return
    try:
        services.close()
    except Exception:  # noqa: BLE001 - closing after a failure must not hide the failure's message
        pass
