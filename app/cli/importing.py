"""`engram import chatgpt|claude|gemini|memories PATH`, `engram import list`, `engram import undo BATCH`.

Bringing history from another assistant (core.importers): the export is read and checked whole before anything is
written; turns are embedded and written in chunks with a progress line; Ctrl-C stops between chunks and running
the same command again resumes (what is already in the store is not added twice).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from core.words import counted

SOURCES = ("chatgpt", "claude", "gemini", "memories")
HELP = {
    "chatgpt": "ChatGPT's data export (the ZIP, or its conversations.json)",
    "claude": "Claude's data export (the ZIP, or its conversations.json)",
    "gemini": "Google Takeout's My Activity for Gemini Apps (the ZIP, or My Activity.json)",
    "memories": "a memory list, one memory a line (copied from ChatGPT's or Claude's memory page; - reads stdin)",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("import", help="bring your history from ChatGPT, Claude or Gemini",
                                  description="Bring conversations and memories from another assistant. Learning "
                                              "from them happens in idle time, turn by turn.")
    commands = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    for source in SOURCES:
        command = commands.add_parser(source, help=HELP[source])
        command.add_argument("path")
        command.set_defaults(func=cmd_import, source=source, lasting=True)
    listing = commands.add_parser("list", help="the imports in this store, and how far learning from each is")
    listing.set_defaults(func=cmd_list)
    undo = commands.add_parser("undo", help="move everything one import brought to the trash")
    undo.add_argument("batch", help="an import's name, as `engram import list` shows it")
    undo.set_defaults(func=cmd_undo)


def cmd_import(args: argparse.Namespace, services: Any) -> int:
    if args.path != "-":
        return _import(args, services, args.path)
    path = _stdin_file()
    try:
        return _import(args, services, path)
    finally:
        os.unlink(path)


def _import(args: argparse.Namespace, services: Any, path: str) -> int:
    from core.importers import archive, write
    parsed = archive.read_export(args.source, path)  # every check before any write
    if not parsed.conversations and not parsed.memories:
        print(f"nothing to import from {args.path}: {_skipped(parsed.skipped) or 'it holds no conversations'}")
        return 0
    batch = write.batch_id(args.source, write.digest_file(path))
    print(f"read {counted(len(parsed.conversations), 'conversation')}, {counted(parsed.turn_count, 'turn')}"
          + (f" and {counted(len(parsed.memories), 'memory')}" if parsed.memories else ""), flush=True)
    try:
        # the embedder loads only if something new is to be embedded; even 4 lines embed faster through the
        # lasting encoder (onnx here: 1.38 s CPU for the whole import against numpy's 1.81, A/B in one run)
        report = write.import_parsed(services.db, services.embedder_on_use(), parsed, batch=batch, progress=_progress)
    except KeyboardInterrupt:
        print("\nstopped; run the same command again to import the rest", flush=True)
        return 130
    _finish_progress()
    print(_summary(report))
    return 0


def cmd_list(args: argparse.Namespace, services: Any) -> int:
    from core.importers.batches import list_batches
    found = list_batches(services.db)
    if not found:
        print("no imports yet (`engram import chatgpt|claude|gemini|memories PATH`)")
    for batch in found:
        print(batch.describe())
    return 0


def cmd_undo(args: argparse.Namespace, services: Any) -> int:
    from core.importers.batches import undo_batch
    turns, conversations, memories = undo_batch(services.db, args.batch)
    print(f"moved to the trash: {counted(turns, 'turn')}, {counted(conversations, 'conversation')} and "
          f"{counted(memories, 'memory')} learned only from them (restore them from the trash)")
    return 0


def _summary(report: Any) -> str:
    parts = [f"imported {counted(report.turns, 'turn')} in {counted(report.conversations, 'conversation')}"]
    if report.memories or report.memories_already:
        parts.append(f"{counted(report.memories, 'memory')}")
    if report.already or report.memories_already:
        parts.append(f"{report.already + report.memories_already:,} already here")
    skipped = _skipped(report.skipped)
    line = ", ".join(parts) + (f"; left out: {skipped}" if skipped else "")
    if report.turns:
        line += f". Engram learns from them while you are away (`engram import list` shows how far: {report.batch})"
    return line


def _skipped(skipped: Any) -> str:
    return ", ".join(f"{count:,} {what}" for what, count in sorted(skipped.items()) if count)


def _progress(done: int, total: int) -> None:
    if sys.stdout.isatty():
        print(f"\rimporting: {done:,} of {total:,} turns", end="", flush=True)


def _finish_progress() -> None:
    if sys.stdout.isatty():
        print()


def _stdin_file() -> str:
    """A memory list piped in: kept in a private temporary file while it is read like any other."""
    import tempfile
    data = sys.stdin.buffer.read(4 * 1024 * 1024 + 1)
    handle, name = tempfile.mkstemp(prefix="engram-memories-", suffix=".txt")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    return name
