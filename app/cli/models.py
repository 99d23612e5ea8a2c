"""`engram models list|download|add|remove|use`: the chat models on this machine, from the terminal.

`list` gives each model's verdict (fits / tight / too big) against the memory a model may use here (models.budget)
and marks the recommended one. `download` shows the size before it starts, then bytes, rate and ETA; Ctrl-C stops
it cleanly (nothing is installed; the partial files stay, so running it again resumes where it stopped). Only
`download` touches the network.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from core.config import update_settings
from core.errors import InvalidInput
from core.words import counted

PROGRESS_INTERVAL = 0.5  # seconds between progress lines when stderr is not a terminal


def register(subparsers: argparse._SubParsersAction) -> None:
    models = subparsers.add_parser("models", help="chat models: list, download, remove, choose")
    commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    listing = commands.add_parser("list", help="the curated models with size, memory need and fit; installed ones")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)

    download = commands.add_parser("download", help="download a model (default: the one recommended here)")
    download.add_argument("model", nargs="?", help="a curated name (e.g. Qwen3-4B-4bit) or an mlx-community repo id")
    download.add_argument("--yes", "-y", action="store_true", help="don't ask before downloading")
    download.set_defaults(func=cmd_download)

    remove = commands.add_parser("remove", help="delete an installed model")
    remove.add_argument("model")
    remove.set_defaults(func=cmd_remove)

    from app.cli.models_add import register as register_add
    register_add(commands, cmd_add)

    use = commands.add_parser("use", help="choose the chat model: an installed name, a repo id or a local folder")
    use.add_argument("model")
    use.set_defaults(func=cmd_use)


def open_store(services: Any) -> Any:
    """The models folder with the memory a model may use here, so oversize models are refused (tests replace
    this)."""
    from models.budget import memory_budget
    from models.download import ModelStore
    return ModelStore(services.models_dir, total_ram=memory_budget().bytes or None)


# -- list ------------------------------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace, services: Any) -> int:
    from models.budget import MemoryBudget, budget_words, memory_budget
    from models.registry import CURATED, default_model, fit, total_ram_bytes
    from app.services.platform import this_machine
    from models.speed import machine_speed, speed_words
    store = open_store(services)
    ram = store.total_ram or 0  # the budget the store refuses models by: the verdicts use the same figure
    budget = MemoryBudget(ram, memory_budget().source)
    active = services.settings.chat_model
    installed = {m.repo_id: m for m in store.usable(active)}
    speed = machine_speed(services.data_dir)  # measured once here, cached in the data folder
    recommended = default_model(ram, speed=speed).repo_id
    rows: list[dict[str, Any]]
    rows = [{"name": info.name, "repo_id": info.repo_id, "family": info.family, "params_b": info.params_b,
             "size_bytes": info.size_bytes, "context_length": info.context_length, "ram_bytes": info.ram_bytes,
             "fit": fit(info.ram_bytes, ram), "installed": info.repo_id in installed,
             "tokens_per_second": speed.model_pace(info) if speed is not None else None,
             "active": active in (info.repo_id, info.name), "recommended": info.repo_id == recommended,
             "source": "curated"} for info in CURATED]
    curated = {info.repo_id for info in CURATED}
    rows += [_installed_row(m, active, ram) for m in installed.values() if m.repo_id not in curated]
    if args.json:
        print(json.dumps({"budget_bytes": ram, "budget_source": budget.source, "total_ram_bytes": total_ram_bytes(),
                          "active": active, "models": rows}, indent=2))
        return 0
    colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    print(f"Fit is measured against {budget_words(budget, this_machine())}. * active, + installed")
    print(f"  {'model':<34} {'size':>9} {'context':>8} {'needs':>9} {'speed here':>14}  fit")
    for row in rows:
        marks = ("*" if row["active"] else " ") + ("+" if row["installed"] else " ")
        context = f"{row['context_length'] // 1024}k" if row.get("context_length") else ""
        needs = human_bytes(row["ram_bytes"]) if row.get("ram_bytes") else ""
        verdict = verdict_text(row["fit"], colour)
        recommended = "  Recommended" if row["recommended"] else ""
        pace = speed_words(row.get("tokens_per_second"))
        print(f"{marks}{row['name']:<34} {human_bytes(row['size_bytes']):>9} {context:>8} {needs:>9} {pace:>14}  "
              f"{verdict}{recommended}")
        if row["source"] == "folder":
            print(f"     from the folder {row['path']}")
    if not installed:
        print(f"\nNo model is installed yet. Get the recommended one with: engram models download "
              f"{default_model(ram, speed=speed).name}")
    return 0


VERDICT_COLOURS = {"fits": "32", "tight": "33", "too big": "31"}  # ANSI green, yellow, red: the terminal's own
# shades, readable on its light or dark background


def verdict_text(verdict: str, colour: bool) -> str:
    """The verdict padded to one width, coloured as a pill would be on a terminal (plain in a pipe or a log)."""
    text = f"{verdict:<7}"
    return f"\033[{VERDICT_COLOURS[verdict]}m{text}\033[0m" if colour and verdict in VERDICT_COLOURS else text


def _installed_row(model: Any, active: str, ram: int) -> dict[str, Any]:
    """A listing row for a model outside the curated list: downloaded by repo id, or a folder the user added."""
    from models.registry import fit, need_for_folder
    need = need_for_folder(model.path)
    return {"name": model.name, "repo_id": model.repo_id, "size_bytes": model.size_bytes, "ram_bytes": need,
            "installed": True, "active": active in (model.repo_id, model.name), "fit": fit(need, ram),
            "recommended": False, "source": "folder" if model.local else "download", "path": str(model.path)}


# -- download --------------------------------------------------------------------------------------------

def cmd_download(args: argparse.Namespace, services: Any) -> int:
    from models.download import DownloadCancelled, DownloadPaused
    from models.registry import default_model, find_model
    from models.speed import machine_speed
    store = open_store(services)
    repo_id = args.model or default_model(store.total_ram or 0, speed=machine_speed(services.data_dir)).repo_id
    curated = find_model(repo_id)
    repo_id = curated.repo_id if curated else repo_id
    printer = ProgressPrinter(sys.stderr)
    plan = store.plan(repo_id, on_retry=printer.retrying)
    print(f"{repo_id}: {counted(len(plan.files), 'file')}, {human_bytes(plan.total_bytes)} "
          f"({human_bytes(plan.bytes_to_download)} to download) into {store.root}")
    if not args.yes and sys.stdin.isatty() and not _confirm("Download it? [Y/n] "):
        print("Nothing was downloaded.")
        return 1
    pause = threading.Event()
    try:
        installed = _run_cancellable(lambda: store.download(repo_id, progress=printer, pause=pause,
                                                                   on_retry=printer.retrying), pause)
    except (DownloadPaused, DownloadCancelled) as stopped:
        printer.finish()
        print(f"{stopped} Run `engram models download {repo_id}` again to resume where it stopped.",
              file=sys.stderr)
        return 130
    printer.finish()
    print(f"Installed {installed.repo_id} ({human_bytes(installed.size_bytes)}) at {installed.path}")
    if not services.settings.chat_model:
        _save_choice(services, installed.repo_id)
        print(f"{installed.repo_id} is now the chat model.")
    return 0


def _run_cancellable(work: Callable[[], Any], cancel: threading.Event) -> Any:
    """Run `work` on a helper thread so Ctrl-C here sets `cancel` (the download's pause) and then waits for it to
    stop cleanly. The helper stays parked once done, never ended: the install built the model with MLX on it, and
    MLX 0.32 aborted the process at exit (134, "terminate called without an active exception") in 5 of 7 runs
    when such a thread had ended (as models.worker parks its thread)."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised on the calling thread
            outcome["error"] = exc
        finally:
            done.set()
        threading.Event().wait()  # parked: a daemon thread costs nothing at exit

    threading.Thread(target=target, name="engram-download", daemon=True).start()
    # Event.wait, not Thread.join: an interrupted join can report a running thread as finished
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            cancel.set()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class ProgressPrinter:
    """Download progress as one line: bytes, percent, rate and ETA (redrawn on a terminal, throttled in a log)."""

    def __init__(self, stream: TextIO, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.redraw = stream.isatty()
        self.last_print = float("-inf")
        self.printed = False

    def __call__(self, progress: Any) -> None:
        now = self.clock()
        done = progress.done_bytes >= progress.total_bytes
        if not self.redraw and not done and now - self.last_print < PROGRESS_INTERVAL:
            return
        self.last_print = now
        self.printed = True
        line = progress_line(progress)
        self.stream.write(f"\r{line}\033[K" if self.redraw else f"{line}\n")
        self.stream.flush()

    def retrying(self, seconds: float) -> None:
        """A dropped connection: say why the bytes stopped, on its own line."""
        self.finish()
        self.stream.write(f"  The connection dropped; trying again in {seconds:g} s.\n")
        self.stream.flush()
        self.printed = False

    def finish(self) -> None:
        if self.redraw and self.printed:
            self.stream.write("\n")
            self.stream.flush()


def progress_line(progress: Any) -> str:
    percent = 100.0 * progress.done_bytes / progress.total_bytes if progress.total_bytes else 100.0
    eta = "--:--" if progress.eta_seconds is None else _clock_text(progress.eta_seconds)
    return (f"  {human_bytes(progress.done_bytes)} / {human_bytes(progress.total_bytes)}  {percent:5.1f}%  "
            f"{human_bytes(progress.bytes_per_second)}/s  ETA {eta}")


# -- remove and use --------------------------------------------------------------------------------------

def cmd_remove(args: argparse.Namespace, services: Any) -> int:
    from models.registry import find_model
    store = open_store(services)
    curated = find_model(args.model)
    repo_id = curated.repo_id if curated else args.model
    if store.find_installed(args.model) is None and repo_id.count("/") == 1 and not Path(repo_id).is_absolute():
        freed = store.discard_partial(repo_id)  # a download stopped with Ctrl-C: its partial files
        if freed:
            print(f"Removed the unfinished download of {repo_id} ({human_bytes(freed)} freed).")
            return 0
    removed = store.remove(args.model)
    if removed.local:
        print(f"Engram no longer lists {removed.path}; its files are left as they are.")
    else:
        print(f"Removed {removed.repo_id} ({human_bytes(removed.size_bytes)} freed).")
    if services.settings.chat_model in (removed.repo_id, removed.name, str(removed.path)):
        _save_choice(services, "")
        print("It was the chat model; choose another with `engram models use NAME`.")
    return 0


def cmd_add(args: argparse.Namespace, services: Any) -> int:
    from app.cli.models_add import add_model
    store = open_store(services)
    added = add_model(args.path, store)
    print(f"Added {added.repo_id} ({human_bytes(_folder_bytes(added.path))}).")
    if not services.settings.chat_model:  # the first model added is the one Engram chats with, as in the app
        _save_choice(services, added.repo_id)
        print(f"Chat model: {added.repo_id}.")
    else:
        print(f"Chat with it: engram models use {added.repo_id}")
    return 0


def cmd_use(args: argparse.Namespace, services: Any) -> int:
    from models.checks import check_model_folder
    if not args.model.strip():  # Path("") is the current folder: never what an empty name meant
        raise InvalidInput("give a model: an installed name, a repo id or a folder (see `engram models list`)")
    store = open_store(services)
    installed = store.find_installed(args.model)
    local = Path(args.model).expanduser()
    if installed is None and local.suffix.lower() == ".gguf":
        from app.cli.models_add import gguf_hint
        raise InvalidInput(gguf_hint(args.model))
    if installed is not None:
        choice, folder = installed.repo_id, installed.path
    elif local.is_dir():
        added = store.add_folder(local)  # checked, then remembered: `models list` and the Models panel show it
        choice, folder = added.repo_id, added.path
    else:
        folder = store.resolve(args.model)  # a repo in the Hugging Face cache, or a clear "not installed"
        choice = args.model
    config = check_model_folder(folder, total_ram=store.total_ram)
    _save_choice(services, choice)
    print(f"Chat model: {choice} ({config['model_type']}, {human_bytes(_folder_bytes(folder))}).")
    return 0


def _save_choice(services: Any, chat_model: str) -> None:
    # only this field, merged into the file as it is now: the open app may have saved other settings meanwhile
    services.settings = update_settings(services.data_dir, {"chat_model": chat_model})


# -- small helpers ---------------------------------------------------------------------------------------

def human_bytes(count: float) -> str:
    """Binary units, as the registry and the Models panel count them."""
    for unit, size in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{int(count)} B"


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))


def _confirm(question: str) -> bool:
    try:
        answer = input(question).strip().lower()
    except EOFError:
        return False
    return answer in ("", "y", "yes")

