"""`engram memory ...`: look at and change what Engram remembers, from the terminal."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.arguments import count, real, row_id
from core.errors import InvalidInput
from core.words import counted

if TYPE_CHECKING:
    from core.types import Memory

# core.types.MEMORY_KINDS, named here so that parsing the command line imports no more than it needs (a test keeps
# them equal)
MEMORY_KINDS = ("episodic", "semantic", "summary")
SAID_OUTRIGHT = 0.9  # core.memory.manage.SAID_OUTRIGHT, the same way

STATUSES = ("active", "trashed", "forgotten", "invalidated", "all")
EXPORTED_WORDS = {"sessions": "session", "episodes": "episode", "memories": "memory", "history": "history row",
                  "edges": "edge"}  # core.store.export.SECTIONS, each as one of it is called
FORGET_WORD = "FORGET"  # typed to confirm forget-all: a word, not y/n, so it is never said by reflex


def register(subparsers: argparse._SubParsersAction) -> None:
    memory = subparsers.add_parser("memory", help="list, search and edit what Engram remembers")
    commands = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    add = commands.add_parser("add", help="remember a fact")
    add.add_argument("statement")
    _triple_options(add)
    add.add_argument("--kind", choices=MEMORY_KINDS, default="semantic")
    add.add_argument("--critical", action="store_true", help="always consider it (allergies, deadlines...)")
    add.add_argument("--confidence", type=real(0.0, 1.0), default=SAID_OUTRIGHT)
    add.add_argument("--pin", action="store_true")
    add.add_argument("--protect", action="store_true")
    add.set_defaults(func=cmd_add)

    search = commands.add_parser("search", help="recall the memories and episodes closest to a query")
    search.add_argument("query")
    search.add_argument("-k", type=count(1, 1000), default=10)
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_search)

    listing = commands.add_parser("list", help="list memories, newest first")
    listing.add_argument("--status", choices=STATUSES, default="active")
    listing.add_argument("--kind", choices=MEMORY_KINDS)
    for flag in ("pinned", "protected", "critical"):
        listing.add_argument(f"--{flag}", action="store_true", default=None, help=f"only {flag} memories")
    listing.add_argument("--limit", type=count(), default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)

    show = commands.add_parser("show", help="one memory with its sources and history")
    show.add_argument("id", type=row_id)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    for name, helptext in (("pin", "always keep in mind"), ("protect", "never forget or delete automatically")):
        flag = commands.add_parser(name, help=helptext)
        flag.add_argument("ids", nargs="+", type=row_id)
        flag.add_argument("--off", action="store_true", help=f"un{name} instead")
        flag.add_argument("--reason", default="")
        flag.set_defaults(func=cmd_flag, flag_name=name)

    edit = commands.add_parser("edit", help="change a memory; the old text stays in its history")
    edit.add_argument("id", type=row_id)
    edit.add_argument("--statement")
    _triple_options(edit, default=None)
    edit.add_argument("--kind", choices=MEMORY_KINDS)
    edit.add_argument("--confidence", type=real(0.0, 1.0))
    edit.add_argument("--reason", default="edited by hand")
    edit.set_defaults(func=cmd_edit)

    for name, helptext in (("delete", "move memories to the trash"), ("restore", "bring memories back")):
        move = commands.add_parser(name, help=helptext)
        move.add_argument("ids", nargs="+", type=row_id)
        move.add_argument("--reason", default="")
        move.set_defaults(func=cmd_move, move_name=name)

    reject = commands.add_parser("reject", help="this is wrong: move it to the trash and never learn it again "
                                                "(restoring it takes that back)")
    reject.add_argument("ids", nargs="+", type=row_id)
    reject.set_defaults(func=cmd_reject)

    forget_all = commands.add_parser(
        "forget-all", help=f"erase everything Engram knows about you, after a backup (type {FORGET_WORD} to confirm)")
    forget_all.add_argument("--confirm", metavar="WORD",
                            help=f"the word {FORGET_WORD}, typed here instead of at the prompt (for scripts)")
    forget_all.set_defaults(func=cmd_forget_all)

    purge = commands.add_parser("purge", help="erase trashed memories for good (their text leaves the file)")
    purge.add_argument("ids", nargs="*", type=row_id)
    purge.add_argument("--all", action="store_true", help="empty the whole trash (memories and episodes)")
    purge.set_defaults(func=cmd_purge)

    exporting = commands.add_parser("export", help="write everything to a JSON file (docs/EXPORT_FORMAT.md)")
    exporting.add_argument("path")
    exporting.add_argument("--force", action="store_true", help="replace the file if it exists")
    exporting.set_defaults(func=cmd_export)

    importing = commands.add_parser("import", help="add an export file's contents under new ids")
    importing.add_argument("path")
    importing.set_defaults(func=cmd_import, lasting=True)  # a whole file embedded: the faster encoder pays

    reembed = commands.add_parser("reembed", help="remake every vector with the configured embedder")
    reembed.set_defaults(func=cmd_reembed)


def _triple_options(parser: argparse.ArgumentParser, default: str | None = "") -> None:
    parser.add_argument("--subject", default=default)
    parser.add_argument("--relation", default=default)
    parser.add_argument("--object", default=default)


def _manager(services: Any):
    from core.memory.manage import MemoryManager
    return MemoryManager(services.db, services.embedder_on_use())  # a statement already held needs no model


def _reader(services: Any):
    """For commands that only read (list, show, export): a store made read-only is opened read-only."""
    from core.memory.manage import MemoryManager
    return MemoryManager(services.reading_db)


def _confirm_replace(path: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{path} exists. Replace it? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _store_only(services: Any):
    """For edits that never touch a vector: no need to load the embedding model."""
    from core.memory.manage import MemoryManager
    return MemoryManager(services.db)


def cmd_add(args: argparse.Namespace, services: Any) -> int:
    added = _manager(services).remember(
        args.statement, subject=args.subject, relation=args.relation, object=args.object, kind=args.kind,
        critical=args.critical, confidence=args.confidence, pinned=args.pin, protected=args.protect,
        reason="added by hand")
    memory = added.memory
    if added.existed:
        print(f"already remembered: #{memory.id}, confidence now {memory.confidence:.1f}")
    else:
        print(f"remembered #{memory.id}: {memory.statement}")
    return 0


def cmd_search(args: argparse.Namespace, services: Any) -> int:
    if not args.query.strip():
        raise InvalidInput("the search query is empty")
    if args.k < 1:
        raise InvalidInput("-k must be at least 1")
    from core.memory.recall import recall
    result = recall(services.db, services.embedder, args.query, k=args.k)
    if args.json:
        print(json.dumps([{"kind": h.kind, "id": int(h.id), "score": float(h.score), "text": h.text,
                           "why": str(h.why)} for h in result.hits], ensure_ascii=False, indent=1))
        return 0
    if not result.hits:
        print("nothing recalled")
    for hit in result.hits:
        print(f"{hit.kind:8} #{hit.id:<6} {hit.score:6.3f}  {_one_line(hit.text)}")
        print(f"{'':17}why: {hit.why}")
    return 0


def cmd_list(args: argparse.Namespace, services: Any) -> int:
    found = _reader(services).list(
        kind=args.kind, pinned=args.pinned, protected=args.protected, critical=args.critical,
        status=None if args.status == "all" else args.status, limit=args.limit)
    if args.json:
        print(json.dumps([_memory_dict(m) for m in found], ensure_ascii=False, indent=1))
        return 0
    if not found:
        print("no memories match")
    for memory in found:
        print(f"#{memory.id:<6} {_flags(memory):5} {memory.status:11} {_one_line(memory.statement)}")
    return 0


def cmd_show(args: argparse.Namespace, services: Any) -> int:
    details = _reader(services).show(args.id)
    if args.json:
        print(json.dumps({"memory": _memory_dict(details.memory),
                          "entities": [{"name": n, "role": r} for n, r in details.entities],
                          "history": [vars(h) for h in details.history]}, ensure_ascii=False, indent=1))
        return 0
    memory = details.memory
    print(f"#{memory.id} [{memory.status}] {memory.statement}")
    if memory.subject or memory.relation or memory.object:
        print(f"  triple: ({memory.subject}, {memory.relation}, {memory.object})")
    print(f"  kind {memory.kind}, confidence {memory.confidence:.2f}, importance {memory.importance:.2f}, "
          f"flags {_flags(memory) or '-'}")
    print(f"  created {_when(memory.created_at)}, valid {_when(memory.valid_from)} .. {_when(memory.valid_to)}")
    if memory.source_episode_ids:
        from core.importers.batches import import_labels
        labels = import_labels(services.db, memory.source_episode_ids)
        print(f"  from episodes {', '.join(_source(i, labels.get(i)) for i in memory.source_episode_ids)}")
    print("  history:")
    for entry in details.history:
        change = _change(entry.old_value, entry.new_value)
        print(f"    {_when(entry.at)} {entry.action:10} {change}{'  (' + entry.reason + ')' if entry.reason else ''}")
    return 0


def _source(episode_id: int, label: str | None) -> str:
    return f"{episode_id} ({label})" if label else str(episode_id)


def cmd_flag(args: argparse.Namespace, services: Any) -> int:
    manager = _store_only(services)
    action = {("pin", False): manager.pin, ("pin", True): manager.unpin,
              ("protect", False): manager.protect, ("protect", True): manager.unprotect}[(args.flag_name, args.off)]
    past = {"pin": "pinned", "protect": "protected"}[args.flag_name]
    with services.db.transaction():  # all or none, as delete: a bad id in the list changes nothing
        done = [action(memory_id, args.reason) for memory_id in _ids(args.ids)]
    for memory in done:
        print(f"#{memory.id} {'un' if args.off else ''}{past}: {_one_line(memory.statement)}")
    return 0


def cmd_edit(args: argparse.Namespace, services: Any) -> int:
    changes = {name: getattr(args, name) for name in ("statement", "subject", "relation", "object", "kind",
                                                      "confidence") if getattr(args, name) is not None}
    if not changes:
        raise InvalidInput("nothing to change: give --statement, --subject, --relation, --object, --kind "
                           "or --confidence")
    memory = _manager(services).edit(args.id, reason=args.reason, **changes)
    print(f"#{memory.id} is now: {memory.statement}")
    _say_if_adapter_learned(services, [memory.id])
    return 0


def cmd_move(args: argparse.Namespace, services: Any) -> int:
    manager = _store_only(services)
    action = manager.delete if args.move_name == "delete" else manager.restore
    ids = _ids(args.ids)
    with services.db.transaction():  # all or none: a bad id in the list changes nothing
        done = [action(memory_id, args.reason) for memory_id in ids]
    verb = "moved to the trash" if args.move_name == "delete" else "restored"
    for memory in done:
        print(f"#{memory.id} {verb}: {_one_line(memory.statement)}")
    if args.move_name == "delete":
        _say_if_adapter_learned(services, ids)
    return 0


def cmd_reject(args: argparse.Namespace, services: Any) -> int:
    manager = _store_only(services)
    ids = _ids(args.ids)
    with services.db.transaction():  # all or none: a bad id in the list changes nothing
        done = [manager.reject(memory_id) for memory_id in ids]
    for memory in done:
        print(f"#{memory.id} moved to the trash; Engram will not learn it again: {_one_line(memory.statement)}")
    _say_if_adapter_learned(services, ids)
    return 0


def cmd_forget_all(args: argparse.Namespace, services: Any) -> int:
    from core.store import wipe
    word = args.confirm
    if word is None:
        print(f"This erases {wipe.describe(wipe.counts(services.db))}, after a backup.")
        print(f"What stays: {wipe.WHAT_STAYS}.")
        word = _typed(f"Type {FORGET_WORD} to erase everything: ")
    if word.strip() != FORGET_WORD:
        raise InvalidInput(f"you typed {word.strip()[:40]!r}, not {FORGET_WORD}: nothing was erased")
    result = _store_only(services).forget_everything()
    print(f"erased {result.summary()}.")
    print(f"A backup of everything is at {result.backup}; `engram doctor --restore --force` puts it back.")
    return 0


def _typed(question: str) -> str:
    try:
        return input(question)
    except (EOFError, OSError):  # no terminal to type in (a pipe that ended, a closed stdin): nothing typed
        print()  # end the prompt's line, so the refusal that follows reads on its own line
        return ""


def _say_if_adapter_learned(services: Any, memory_ids: list[int]) -> None:
    from core.finetune.adapters import active_adapter_notice
    notice = active_adapter_notice(services.db, "memory", memory_ids)
    if notice:
        print(notice)


def cmd_purge(args: argparse.Namespace, services: Any) -> int:
    if args.ids and args.all:
        raise InvalidInput("give either the ids of trashed memories to purge or --all (the whole trash), not both")
    if not args.ids and not args.all:
        raise InvalidInput("give the ids of trashed memories to purge, or --all to empty the whole trash")
    manager = _store_only(services)
    result = manager.purge() if args.all else manager.purge(memory_ids=_ids(args.ids))
    print(f"purged {counted(result.memories, 'memory')} and {counted(result.episodes, 'episode')} for good"
          + (f"; removed {counted(result.backups_removed, 'upgrade backup')} that still held their text"
             if result.backups_removed else ""))
    if result.scrub_pending:
        print("Older copies of their pages in the write-ahead log are erased as soon as the other Engram process "
              "reading the store closes it (pending until the other reader closes; at the latest when Engram next "
              "opens the store).")
    return 0


def cmd_export(args: argparse.Namespace, services: Any) -> int:
    if Path(args.path).exists() and not args.force and not _confirm_replace(args.path):
        raise InvalidInput(f"{args.path} exists; nothing was written. Add --force to replace it.")
    counts = _reader(services).export_to(args.path)
    said = ", ".join(counted(n, EXPORTED_WORDS.get(name, name)) for name, n in counts.items())
    print(f"exported {said} to {args.path}")
    return 0


def cmd_import(args: argparse.Namespace, services: Any) -> int:
    result = _manager(services).import_from(args.path)
    print(f"imported {counted(len(result.memories), 'memory')}, {counted(len(result.episodes), 'episode')}, "
          f"{counted(len(result.sessions), 'session')}, {counted(result.history_rows, 'history row')}, "
          f"{counted(result.edges, 'edge')}")
    already = len(result.existing_memories), len(result.existing_episodes), len(result.existing_sessions)
    if any(already):  # importing the same file again adds nothing: say why
        print(f"already here, not added again: {counted(already[0], 'memory')}, "
              f"{counted(already[1], 'episode')}, {counted(already[2], 'session')}")
    return 0


def cmd_reembed(args: argparse.Namespace, services: Any) -> int:
    done = _manager(services).reembed()
    said = counted(done, "memory or episode", "memories and episodes")
    print(f"re-embedded {said} with {services.embedder.name}")
    return 0


def _ids(values: list[int]) -> list[int]:
    """The ids argparse parsed (12 or #12; anything else is a usage error, exit 2), each once, in the order given."""
    return list(dict.fromkeys(values))


def _memory_dict(memory: Memory) -> dict[str, Any]:
    from core.types import Memory
    data = {name: getattr(memory, name) for name in Memory.__dataclass_fields__}
    data["source_episode_ids"] = list(memory.source_episode_ids)
    data["status"] = memory.status
    return data


def _flags(memory: Memory) -> str:
    return "".join(mark for mark, on in (("P", memory.pinned), ("S", memory.protected), ("C", memory.critical),
                                         ("!", memory.permanent)) if on)


def _change(old: dict | None, new: dict | None) -> str:
    if not old or not new:
        return ""
    changed = [k for k in new if old.get(k) != new.get(k)]
    return "; ".join(f"{k}: {_one_line(str(old.get(k)), 40)} -> {_one_line(str(new.get(k)), 40)}" for k in changed)


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
