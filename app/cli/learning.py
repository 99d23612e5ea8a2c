"""`engram reflect`, `engram relearn`, `engram forget`, `engram hypotheses`, `engram goals`: the learning loop from
the terminal."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any, Sequence

from app.cli.arguments import count, row_id
from core.errors import InvalidInput
from core.words import counted

# core.store.hypotheses.STATUSES, named here so that parsing the command line opens no SQLite (a test keeps them equal)
HYPOTHESIS_STATUSES = ("open", "confirmed", "rejected")


def register(subparsers: argparse._SubParsersAction) -> None:
    reflect = subparsers.add_parser("reflect", help="review ended conversations now and learn about you")
    reflect.add_argument("--session", type=row_id, help="this conversation (default: every one not reviewed yet)")
    reflect.set_defaults(func=cmd_reflect)

    relearn = subparsers.add_parser("relearn", help="try again to learn from chat turns Engram stopped trying on")
    relearn.add_argument("turns", nargs="*", type=row_id, metavar="TURN",
                         help="these turns (default: every turn whose learning was given up)")
    relearn.set_defaults(func=cmd_relearn)

    forget = subparsers.add_parser("forget", help="preview, run or undo forgetting")
    mode = forget.add_mutually_exclusive_group(required=True)
    mode.add_argument("--preview", action="store_true", help="what would be forgotten now, with its score")
    mode.add_argument("--run", action="store_true", help="forget it now (every step can be undone)")
    mode.add_argument("--undo", type=row_id, metavar="EVENT", help="bring back what forgetting event EVENT took")
    mode.add_argument("--log", action="store_true", help="what was forgotten, newest first")
    mode.add_argument("--weights", action="store_true",
                      help="the retention weights learnt from your restores, and from how many signals")
    mode.add_argument("--reset-weights", action="store_true", help="forget what was learnt: back to the defaults")
    forget.add_argument("--limit", type=count(), default=50)
    forget.add_argument("--json", action="store_true")
    forget.set_defaults(func=cmd_forget)

    hyp = subparsers.add_parser("hypotheses", help="what Engram thinks about you: list, confirm, reject, edit")
    hyp_commands = hyp.add_subparsers(dest="hypotheses_command", metavar="ACTION", required=True)
    listing = hyp_commands.add_parser("list", help="every hypothesis with its confidence (the default)")
    listing.add_argument("--status", choices=HYPOTHESIS_STATUSES)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_hypotheses_list)
    for name, status in (("confirm", "confirmed"), ("reject", "rejected")):
        action = hyp_commands.add_parser(name, help=f"{'accept' if name == 'confirm' else 'turn down'} a "
                                         "hypothesis (by id)")
        action.add_argument("id", type=row_id)
        action.set_defaults(func=cmd_hypothesis_decide, status=status)
    edit = hyp_commands.add_parser("edit", help="reword a hypothesis (it keeps its evidence and status)")
    edit.add_argument("id", type=row_id)
    edit.add_argument("new_claim", nargs="?", metavar="CLAIM", help="the new wording (or --claim)")
    edit.add_argument("--claim")
    edit.add_argument("--dimension")
    edit.set_defaults(func=cmd_hypothesis_edit)

    goal = subparsers.add_parser("goals", help="questions Engram wants to ask you: list, close")
    goal_commands = goal.add_subparsers(dest="goals_command", metavar="ACTION", required=True)
    goal_list = goal_commands.add_parser("list", help="the open questions (the default; --all: closed ones too)")
    goal_list.add_argument("--all", action="store_true", help="closed ones too")
    goal_list.set_defaults(func=cmd_goals_list)
    close = goal_commands.add_parser("close", help="answer a question; for a conflict, say which fact holds")
    close.add_argument("id", type=row_id)
    close.add_argument("--answer", default="")
    close.add_argument("--keep", choices=("new", "old"),
                       help="a conflict with a pinned or protected memory: keep the new fact or what you had")
    close.set_defaults(func=cmd_goal_close)


def cmd_reflect(args: argparse.Namespace, services: Any) -> int:
    """Progress goes to stderr (which conversation, n of m, each step, what was kept and left out), results to
    stdout. Turns the chat stored but did not learn from (busy, or it was closed first) are learned first."""
    from app.services.scheduling import structured_model
    from core.assistant import pending_learning
    from core.memory import reflect
    db = services.db
    # asked for now: every conversation with turns not yet reviewed, ended or not
    sessions = [args.session] if args.session is not None else reflect.pending_sessions(db, quiet_seconds=0.0)
    waiting = pending_learning(db)
    if not sessions and not waiting:
        print("nothing to reflect on: every conversation was reviewed")
        return 0
    model = structured_model(services, required=True)
    if waiting:
        _learn_turns(services, model, waiting, "the chat left for later")
    for n, session_id in enumerate(sessions, 1):
        def progress(words: str, n: int = n, session_id: int = session_id) -> None:
            print(f"[{n}/{len(sessions)}] conversation {session_id}: {words}", file=sys.stderr, flush=True)
        report = reflect.reflect_session(db, services.settings, model, session_id, embedder=services.embedder,
                                         progress=progress)
        searched = ", ".join(repr(query) for query in report.searches)
        print(f"conversation {session_id}: {counted(len(report.added), 'new hypothesis')}, "
              f"{len(report.strengthened)} strengthened, {len(report.kept_rejected)} kept rejected, "
              f"{counted(len(report.goals_opened), 'goal')} opened, {len(report.goals_closed)} closed"
              + (f"; searched for {searched}" if searched else "") + _dropped_line(report.dropped_counts()))
    return 0


def cmd_relearn(args: argparse.Namespace, services: Any) -> int:
    """Turns whose learning was given up (or that wait after a failure) are learned now, each through the store's
    claim like any other learning (core.store.turn_learning.requeue): never twice."""
    from app.services.scheduling import structured_model
    from core.store import turn_learning
    db = services.db
    turns = args.turns or [g.episode_id for g in turn_learning.given_up(db)]
    if not turns:
        print("nothing to try again: Engram has not given up learning from any turn")
        return 0
    model = structured_model(services, required=True)  # no model: a clear error before anything changes
    turn_learning.requeue(db, turns)
    _learn_turns(services, model, turns, "again")
    return 0


def _learn_turns(services: Any, model: Any, waiting: Sequence[int], which: str) -> None:
    from core.assistant import Assistant
    from core.store import health, turn_learning
    print(f"learning {counted(len(waiting), 'turn')} {which}", file=sys.stderr, flush=True)
    assistant = Assistant(services.db, services.embedder,
                          None,  # type: ignore[arg-type]  # learns, never answers: learn() reads no chat model
                          model, services.settings)
    for n, episode_id in enumerate(waiting, 1):
        try:
            report = assistant.learn(assistant.stored_turn(episode_id))
        except Exception as exc:  # noqa: BLE001 - the turn's failure, counted by the store; the others go on
            if isinstance(exc, turn_learning.TRANSIENT) or health.is_corruption(exc):
                raise  # the store's problem, not the turn's: it ends the command
            print(f"[{n}/{len(waiting)}] turn {episode_id}: {not_learned(services.db, episode_id, exc)}",
                  file=sys.stderr, flush=True)
            continue
        words = ("learned elsewhere meanwhile" if report.skipped else
                 f"{counted(len(report.facts), 'fact')} kept, {len(report.dropped)} left out"
                 + (f" ({report.errors[0]})" if report.errors else ""))
        print(f"[{n}/{len(waiting)}] turn {episode_id}: {words}", file=sys.stderr, flush=True)


def not_learned(db: Any, episode_id: int, exc: Exception) -> str:
    """A turn whose learning raised: tried again on a later pass, or given up (core.store.turn_learning) — and
    then how to ask for another go."""
    from core.store import turn_learning
    if turn_learning.given_up(db, [episode_id]):
        return (f"Engram stopped trying after {turn_learning.MAX_ATTEMPTS} tries ({type(exc).__name__}: {exc}); "
                f"`engram relearn {episode_id}` tries again")
    return f"could not be learned, tried again later ({type(exc).__name__}: {exc})"


def _dropped_line(counts: dict[str, int]) -> str:
    """What reflection left out and why, on the same line: "; left out: 2 hypotheses not language, ..."."""
    def said(n: int, what_and_why: str) -> str:
        what, _, why = what_and_why.partition(" ")  # "hypothesis not language": the thing, then the reason
        return f"{counted(n, what)} {why}".rstrip()
    return "; left out: " + ", ".join(said(n, key) for key, n in counts.items()) if counts else ""


def cmd_forget(args: argparse.Namespace, services: Any) -> int:
    from core.memory import forget
    db, settings = services.db, services.settings
    if args.undo is not None:
        event = forget.undo(db, args.undo)
        print(f"restored {event.item_type} {event.item_id} (forgetting event {event.id})")
        return 0
    if args.weights or args.reset_weights:
        return _forget_weights(args, db, settings)
    if args.log:
        events = forget.list_events(db, limit=args.limit)
        _emit(args, [e.__dict__ for e in events], [_event_line(e) for e in events], "nothing was forgotten yet")
        return 0
    if args.preview:
        limit = forget.threshold(settings)
        items, total = forget.preview_top(db, settings, args.limit)
        rows = [{**item.__dict__, "reason": item.reason(limit)} for item in items]
        lines = [f"{r['item_type']:<8} {r['item_id']:>6}  {r['reason']}" for r in rows]
        _emit(args, rows, lines + ([f"... and {total - args.limit} more"] if total > args.limit else []),
              "nothing would be forgotten now")
        return 0
    result = forget.forgetting_pass(db, settings, embedder=services.embedder)
    print(f"archived {counted(len(result.archived), 'fact')}, compacted "
          f"{counted(len(result.compacted), 'conversation turn')} into "
          f"{counted(len(result.summaries), 'summary')} ({result.seconds:.1f}s); `engram forget --log` lists them, "
          "`engram forget --undo EVENT` brings one back")
    return 0


def _forget_weights(args: argparse.Namespace, db: Any, settings: Any) -> int:
    from core.memory import learned
    if args.reset_weights:
        signals = learned.load(db, settings).signals
        learned.reset(db)
        print(f"forgetting weights reset to the defaults ({counted(signals, 'signal')} set aside)")
        return 0
    if args.json:
        weights = learned.load(db, settings)
        print(json.dumps({"learn": settings.forgetting.learn, **weights.__dict__, "signals": weights.signals,
                          "defaults": {n: getattr(learned.defaults(settings), n) for n in learned.NAMES},
                          "bounds": learned.BOUNDS}, indent=2))
    else:
        print(learned.describe(db, settings))
    return 0


def cmd_hypotheses_list(args: argparse.Namespace, services: Any) -> int:
    from core.store import hypotheses
    rows = hypotheses.list_hypotheses(services.db, status=args.status)
    ready = services.settings.reflection.confirm_threshold
    if args.json:
        print(json.dumps([h.__dict__ for h in rows], indent=2))
        return 0
    if not rows:
        print("no hypotheses yet")
    for h in rows:
        hint = "  (ready to confirm)" if h.status == "open" and h.confidence >= ready else ""
        print(f"{h.id:>4}  {h.status:<9} {h.confidence:.2f}  [{h.dimension}] {h.claim}  "
              f"evidence: {', '.join(map(str, h.evidence_episode_ids)) or '-'}{hint}")
    return 0


def cmd_hypothesis_decide(args: argparse.Namespace, services: Any) -> int:
    from core.store import hypotheses
    h = hypotheses.decide(services.db, args.id, args.status)
    after = ("it shapes how Engram talks to you from the next conversation" if h.status == "confirmed"
             else "it will not come back on the same evidence")
    print(f"hypothesis {h.id} {h.status}: {h.claim} — {after}")
    return 0


def cmd_hypothesis_edit(args: argparse.Namespace, services: Any) -> int:
    if args.new_claim is not None and args.claim is not None:
        raise InvalidInput("give the new wording once: as CLAIM or as --claim; nothing was changed")
    args.claim = args.claim if args.new_claim is None else args.new_claim
    if args.claim is None and args.dimension is None:
        raise InvalidInput("give --claim and/or --dimension")
    for name in ("claim", "dimension"):
        if getattr(args, name) is not None and not getattr(args, name).strip():
            raise InvalidInput(f"the new {name} is empty; give the words it should say. Nothing was changed.")
    from core.store import hypotheses
    h = hypotheses.edit_hypothesis(services.db, args.id, claim=args.claim, dimension=args.dimension)
    print(f"hypothesis {h.id}: [{h.dimension}] {h.claim} ({h.status})")
    return 0


def cmd_goals_list(args: argparse.Namespace, services: Any) -> int:
    from core.memory.reconcile import conflict_of
    from core.store import goals
    rows = goals.list_goals(services.db, status=None if args.all else "open")
    if not rows:
        print("no open learning goals" if not args.all else "no learning goals yet")
    for g in rows:
        answer = f"  answer: {g.answer}" if g.answer else ""
        hint = "  [close it with --keep new or --keep old]" if g.status == "open" and conflict_of(g) else ""
        print(f"{g.id:>4}  {g.status:<6} {g.question}" + (f"  (why: {g.reason})" if g.reason else "") + answer
              + hint)
    return 0


def cmd_goal_close(args: argparse.Namespace, services: Any) -> int:
    from core.memory.reconcile import resolve_conflict
    from core.store import goals
    if args.keep:
        g = resolve_conflict(services.db, args.id, args.keep, args.answer)
    else:
        g = goals.close_goal(services.db, args.id, args.answer)
    print(f"learning goal {g.id} closed" + (f": {g.answer}" if g.answer else ""))
    if args.keep == "new":
        print(f"memory {g.memory_ids[1]} now holds it; memory {g.memory_ids[0]} is closed and kept in its history")
    return 0


def _emit(args: argparse.Namespace, rows: list[dict], lines: list[str], empty: str) -> None:
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
    elif not rows:
        print(empty)
    else:
        print("\n".join(lines))


def _event_line(event: Any) -> str:
    when = dt.datetime.fromtimestamp(event.at).strftime("%Y-%m-%d %H:%M")
    undone = "  (undone)" if event.restored_at is not None else ""
    into = f" into summary {event.summary_id}" if event.summary_id else ""
    return f"{event.id:>5}  {when}  {event.action} {event.item_type} {event.item_id}{into}: {event.reason}{undone}"
