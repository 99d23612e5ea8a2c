"""Installed models under <data_dir>/models, and downloads from Hugging Face into it.

A download goes to a staging folder file by file (models.fetch: resumed after a pause or a dropped connection,
retried with backoff, each file's checksum verified), is checked (config, architecture, intact weights, fits in
memory, builds with every weight bound), and only then is moved into place with one rename and a marker file: a
partial or broken download is never offered as installed. Nothing touches the network unless `plan` or
`download` is called.
"""
from __future__ import annotations

import fnmatch
import json
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from core.errors import InvalidInput, ModelError, ModelMissing
from models.checks import check_model_folder, check_tokenizer_folder, too_big_message, verify_loads
from models.fetch import (PART_SUFFIX, STATE_FILE, DownloadCancelled, DownloadPaused, DownloadProgress, ProgressMeter,
                          fetch_file, prepare_staging, present_bytes, with_retries)
from models.hub import ALLOW_PATTERNS, RemoteFile
from models.registry import GB, find_model

__all__ = ["ALLOW_PATTERNS", "DownloadCancelled", "DownloadPaused", "DownloadPlan", "DownloadProgress",
           "InstalledModel", "ModelStore", "STAGING"]

MARKER = "engram-model.json"
# Model folders the user added from elsewhere on disk. Kept here, beside the downloads, not in settings.json:
# this folder is the record of which models this machine has (`models remove` edits it), settings.json holds only
# the user's choices (the open app reloads on each change of it), and a list of paths is no Settings field.
ADDED_FOLDERS = "added-folders.json"
STAGING = ".staging"
DISK_MARGIN = 1.1  # keep 10% spare beyond the download itself


@dataclass(frozen=True)
class DownloadPlan:
    repo_id: str
    files: tuple[str, ...]
    total_bytes: int
    bytes_to_download: int  # less than total_bytes when a paused or interrupted download left files behind
    revision: str = ""
    remote: tuple[RemoteFile, ...] = ()


@dataclass(frozen=True)
class InstalledModel:
    name: str
    repo_id: str
    path: Path
    size_bytes: int
    local: bool = False  # a folder the user added: listed and usable, never moved or deleted by Engram


def folder_name(repo_id: str) -> str:
    return repo_id.replace("/", "--")


class ModelStore:
    """The models folder. `hub` (models.hub.HubClient's three methods), `disk_usage` and `sleep` (the backoff
    between retries; None: a real wait that a pause or cancel cuts short) are injectable so tests never touch the
    network nor wait. `total_ram` is the memory budget a model may use here (models.budget): a model past it is
    refused; None skips that check."""

    def __init__(self, root: Path | str, *, total_ram: int | None = None, hub: Any = None,
                 disk_usage: Callable[[Path], Any] = shutil.disk_usage,
                 sleep: Callable[[float], Any] | None = None) -> None:
        self.root = Path(root)
        self.total_ram = total_ram
        self._hub_client = hub
        self._disk_usage = disk_usage
        self._sleep = sleep

    # -- installed models ----------------------------------------------------------------------------

    def installed(self) -> list[InstalledModel]:
        """Downloaded models first, then the folders the user added that are still there."""
        downloaded = self._downloaded()
        known = {model.path.resolve() for model in downloaded}
        added = [InstalledModel(path.name, str(path), path, _weights_size(path), local=True)
                 for path in self.added_folders() if path.is_dir() and path not in known]
        return downloaded + added

    def usable(self, active: str = "") -> list[InstalledModel]:
        """Every model Engram can chat with here: installed() and, when the chosen model is a folder never
        added (chosen by an older Engram, or typed into settings.json), that folder too."""
        models = self.installed()
        folder = Path(active).expanduser() if active and looks_like_path(active) else None
        if folder is not None and folder.is_dir() and not any(_same_path(active, m.path) for m in models):
            models.append(InstalledModel(folder.name, active, folder, _weights_size(folder), local=True))
        return models

    def added_folders(self) -> list[Path]:
        try:
            entries = json.loads((self.root / ADDED_FOLDERS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []  # none yet, or a damaged list: the folders themselves are untouched
        return [Path(entry) for entry in entries if isinstance(entry, str)] if isinstance(entries, list) else []

    def add_folder(self, folder: Path | str) -> InstalledModel:
        """Remember a local MLX model folder after checking it (ModelError saying why it is not one)."""
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ModelError(f"There is no folder {folder}.")
        folder = folder.resolve()
        if not any(folder.glob("*.safetensors")) and any(folder.glob("*.gguf")):
            raise ModelError(f"{folder} holds GGUF weights, not an MLX model: add the .gguf file itself to have "
                             f"Engram convert it.")
        check_model_folder(folder, total_ram=self.total_ram)
        check_tokenizer_folder(folder)  # one that panics on sample text is refused now, not mid-chat
        model = next((m for m in self._downloaded() if m.path.resolve() == folder), None)
        if model is not None:
            return model  # one of the downloads: already listed
        verify_loads(folder)  # it builds, chats and speaks (models.speech_check): a broken model is not added
        paths = self.added_folders()
        if folder not in paths:
            self._write_added(paths + [folder])
        return InstalledModel(folder.name, str(folder), folder, _weights_size(folder), local=True)

    def _write_added(self, paths: list[Path]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / ADDED_FOLDERS
        tmp = target.with_name(f".{ADDED_FOLDERS}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps([str(path) for path in paths], indent=2), encoding="utf-8")
        tmp.replace(target)

    def _downloaded(self) -> list[InstalledModel]:
        if not self.root.is_dir():
            return []
        found = []
        for folder in sorted(self.root.iterdir()):
            marker = folder / MARKER
            if folder.name.startswith(".") or not marker.is_file():
                continue
            try:
                info = json.loads(marker.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            found.append(InstalledModel(folder.name, str(info.get("repo_id", folder.name)), folder,
                                        int(info.get("size_bytes", 0))))
        return found

    def find_installed(self, ref: str) -> InstalledModel | None:
        wanted = ref.lower()
        for model in self.installed():
            if model.local:  # an added folder answers to its path only: its folder name may be anything
                if _same_path(ref, model.path):
                    return model
                continue
            names = (model.name.lower(), model.repo_id.lower(), model.repo_id.rsplit("/", 1)[-1].lower())
            if wanted in names:
                return model
        return None

    def resolve(self, ref: str) -> Path:
        """A model folder for `ref`: a local folder, an installed model, or a repo already in the HF cache."""
        if not ref:
            raise ModelMissing("No chat model is chosen; run `engram models use NAME`.",
                               in_app="No chat model is chosen yet: download or add one in Models.")
        local = Path(ref).expanduser()
        if local.is_dir():
            return local
        installed = self.find_installed(ref)
        if installed is not None:
            return installed.path
        cached = self._cached_snapshot(ref)
        if cached is not None:
            return cached
        if looks_like_path(ref):
            raise ModelMissing(f"There is no folder {local}: choose a folder that holds an MLX model.",
                               in_app=f"The model folder {local} is gone: add it again, or choose another model "
                                      "in Models.")
        raise ModelMissing(f"The model {ref!r} is not installed; run `engram models download {ref}`.",
                           in_app=f"The model {ref} is not on this computer: download it again, or choose another "
                                  "in Models.")

    def remove(self, ref: str) -> InstalledModel:
        model = self.find_installed(ref)
        if model is None:
            raise ModelError(f"No installed model is called {ref!r}.")
        if model.local:  # the user's own folder: forget it, never delete it
            self._write_added([path for path in self.added_folders() if path != model.path])
            return model
        # Rename first: an interrupted delete then leaves no half model that looks installed.
        trash = self.root / STAGING / f"removing-{uuid.uuid4().hex}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        model.path.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
        return model

    # -- download ------------------------------------------------------------------------------------

    def plan(self, repo_id: str, *, on_retry: Callable[[float], None] | None = None) -> DownloadPlan:
        """What a download would fetch and its size, from the hub's file listing (network); files a paused or
        interrupted download left in staging are not counted again."""
        return self._plan(repo_id, self._waiter(threading.Event(), threading.Event(), on_retry))

    def _plan(self, repo_id: str, wait: Callable[[float], Any]) -> DownloadPlan:
        _check_repo_id(repo_id)
        listing = with_retries(lambda: self._hub().listing(repo_id), wait, repo_id)
        remote = tuple(file for file in listing.files
                       if any(fnmatch.fnmatch(file.name, pattern) for pattern in ALLOW_PATTERNS))
        _refuse_reserved(repo_id, remote)
        if not any(file.name.endswith(".safetensors") for file in remote):
            raise ModelError(f"{repo_id} has no MLX weights (safetensors); it is not an MLX model.")
        total = sum(file.size for file in remote)
        present = present_bytes(self._staging(repo_id), remote, listing.revision)
        return DownloadPlan(repo_id, tuple(file.name for file in remote), total, total - present,
                            listing.revision, remote)

    def download(self, repo_id: str, *, progress: Callable[[DownloadProgress], None] | None = None,
                 cancel: threading.Event | None = None, pause: threading.Event | None = None,
                 on_retry: Callable[[float], None] | None = None) -> InstalledModel:
        """Fetch and install. `pause` stops keeping the partial files (DownloadPaused; the next call continues
        from them), `cancel` stops throwing them away (DownloadCancelled). `on_retry(seconds)` hears of each
        wait before a retry, so the user knows why the bytes stopped."""
        cancel, pause = cancel or threading.Event(), pause or threading.Event()
        wait = self._waiter(cancel, pause, on_retry)
        plan = self._plan(repo_id, wait)
        final = self.root / folder_name(repo_id)
        if (final / MARKER).is_file():
            raise ModelError(f"{repo_id} is already installed.")
        self._check_disk(plan)
        self._check_memory(plan)
        staging = self._staging(repo_id)
        prepare_staging(staging, plan.revision)
        meter = ProgressMeter(plan.total_bytes, plan.total_bytes - plan.bytes_to_download, progress, cancel, pause)
        try:
            for file in plan.remote:
                fetch_file(self._hub(), repo_id, plan.revision, file, staging, meter, wait)
        except DownloadCancelled:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        except OSError as exc:  # a full disk, a folder that went away
            raise ModelError(f"The download of {repo_id} stopped before it finished ({exc}); nothing was "
                             f"installed. Run the download again to resume.") from exc
        return self.install(staging, repo_id=repo_id)

    def _waiter(self, cancel: threading.Event, pause: threading.Event,
                on_retry: Callable[[float], None] | None) -> Callable[[float], None]:
        def wait(seconds: float) -> None:
            if on_retry is not None:
                on_retry(seconds)
            if self._sleep is not None:
                self._sleep(seconds)
                return
            deadline = time.monotonic() + seconds
            while not (cancel.is_set() or pause.is_set()) and time.monotonic() < deadline:
                cancel.wait(0.1)  # the next attempt's check raises the pause or the cancel
        return wait

    def discard_partial(self, repo_id: str) -> int:
        """Throw away what a paused or interrupted download left; returns the bytes freed."""
        _check_repo_id(repo_id)  # never a path: '..' must not name the models folder itself
        staging = self._staging(repo_id)
        freed = sum(path.stat().st_size for path in staging.rglob("*") if path.is_file()) if staging.is_dir() else 0
        shutil.rmtree(staging, ignore_errors=True)
        return freed

    def _staging(self, repo_id: str) -> Path:
        return self.root / STAGING / folder_name(repo_id)  # kept on pause or failure: the next try resumes

    def install(self, folder: Path, *, repo_id: str) -> InstalledModel:
        """Check a complete folder and move it into place with its marker; on failure nothing is installed."""
        check_model_folder(folder, total_ram=self.total_ram)
        verify_loads(folder)
        shutil.rmtree(folder / ".cache", ignore_errors=True)  # an older Engram's huggingface_hub resume metadata
        (folder / STATE_FILE).unlink(missing_ok=True)
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        marker = {"repo_id": repo_id, "installed_at": time.time(), "size_bytes": size}
        (folder / MARKER).write_text(json.dumps(marker), encoding="utf-8")
        final = self.root / folder_name(repo_id)
        if final.exists():
            (folder / MARKER).unlink()
            raise ModelError(f"{final} already exists; remove it first.")
        folder.rename(final)
        return InstalledModel(final.name, repo_id, final, size)

    # -- helpers -------------------------------------------------------------------------------------

    def _hub(self) -> Any:
        if self._hub_client is None:
            from models.hub import HubClient
            self._hub_client = HubClient()
        return self._hub_client

    def _cached_snapshot(self, repo_id: str) -> Path | None:
        return self._hub().cached(repo_id) if "/" in repo_id else None

    def _check_disk(self, plan: DownloadPlan) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        free = self._disk_usage(self.root).free
        if plan.bytes_to_download * DISK_MARGIN > free:
            raise ModelError(f"{plan.repo_id} needs {plan.bytes_to_download / GB:.1f} GB of disk space; only "
                             f"{free / GB:.1f} GB is free.")

    def _check_memory(self, plan: DownloadPlan) -> None:
        from models.registry import TOO_BIG, fit, need_estimate
        if self.total_ram is None:
            return
        curated = find_model(plan.repo_id)
        need = curated.ram_bytes if curated else need_estimate(plan.total_bytes, None)  # no config yet
        if fit(need, self.total_ram) == TOO_BIG:
            raise ModelError(f"{plan.repo_id}: " + too_big_message(need, self.total_ram))


def _refuse_reserved(repo_id: str, remote: tuple[RemoteFile, ...]) -> None:
    """A file named as Engram's own bookkeeping in the staging or model folder would overwrite it (the download's
    state file made every attempt start over, 31 s of retries before a vague failure)."""
    for file in remote:
        name = file.name.rsplit("/", 1)[-1]
        if name in (STATE_FILE, MARKER) or name.endswith(PART_SUFFIX):
            raise ModelError(f"{repo_id} lists a file named {name}, a name Engram keeps for itself in the model "
                             "folder; nothing was downloaded.")


def looks_like_path(ref: str) -> bool:
    """A reference written as a path (absolute, ~, ./ or ../), not a model name or an owner/name repo id."""
    return Path(ref).is_absolute() or ref.startswith(("~", "./", "../", ".\\")) or ref in (".", "..")


def _same_path(ref: str, path: Path) -> bool:
    try:
        return Path(ref).expanduser().resolve() == path.resolve()
    except (OSError, RuntimeError):
        return False


def _weights_size(folder: Path) -> int:
    try:
        return sum(path.stat().st_size for path in folder.glob("*.safetensors"))
    except OSError:
        return 0


def _check_repo_id(repo_id: str) -> None:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts) or any(part in (".", "..") for part in parts):
        raise InvalidInput(f"{repo_id!r} is not a Hugging Face repo id (expected owner/name).")
