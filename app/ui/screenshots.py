"""`engram --screenshots DIR [--data-dir FOLDER]`: open every panel on a seeded sample data folder and save one
PNG per panel (DIR/<panel>.png; the Memories panel twice: the full table, then the simple "About you" view in
DIR/memories-about.png; the chat's controls in DIR/chat-controls.png, a model's settings in DIR/model-settings.png),
then the first-start screen (DIR/first-start.png); then all of them again in dark mode
(DIR/<panel>-dark.png, DIR/memories-about-dark.png, DIR/first-start-dark.png). Without --data-dir a fresh sample
folder is built (app/services/sample_data.py).

It drives the panels through their public methods, as a user would (select a claim, open a conversation), and
waits for each panel's background reads before it grabs the window. Off the Mac (no display) Qt runs offscreen.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

SETTLE_SECONDS = 0.6  # after a panel's first read: follow-up reads (a detail pane, a layout) land
READY_TIMEOUT = 20.0
WINDOW_SIZE = (1280, 800)
READY_SIGNALS = ("loaded", "refreshed", "drawn")
FIRST_START = "first-start"  # the welcome screen's picture, after the panels'
SCHEMES = (("light", ""), ("dark", "-dark"))  # each scheme and the suffix of its file names


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="engram --screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--data-dir", type=Path, help="an existing data folder (default: a new sample folder)")
    args = parser.parse_args(argv)
    for path in take_screenshots(args.out_dir, data_dir=args.data_dir):
        print(path)
    return 0


def take_screenshots(out_dir: Path | str, *, data_dir: Path | str | None = None, embedder: Any = None) -> list[Path]:
    """One PNG per panel of this build, in sidebar order, then the first-start screen, in light then in dark mode;
    returns the files written."""
    if not os.environ.get("QT_QPA_PLATFORM") and sys.platform != "darwin" and not os.environ.get("DISPLAY"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # must be set before the QApplication exists
    from PySide6.QtWidgets import QApplication

    from app.services.wiring import Services
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(["engram"])
    sample = _sample_folder(embedder) if data_dir is None else None
    from app.ui.gc import GuiThreadCollector
    collector = GuiThreadCollector().start()  # as in the app: Qt garbage is collected on this thread
    try:
        return _shoot(app, Services.from_data_dir(sample or data_dir), out_dir, embedder)
    finally:
        collector.stop()
        if sample is not None:
            shutil.rmtree(sample.parent, ignore_errors=True)  # a throwaway folder made for these pictures


def _shoot(app: Any, services: Any, out_dir: Path, embedder: Any) -> list[Path]:
    from app.ui.main_window import MainWindow
    if embedder is not None:
        services._embedder = embedder  # already loaded: the memory panel need not load it again
    _ = services.db  # opened here, before panels start reading it from the database lane
    window = MainWindow(services)
    window.resize(*WINDOW_SIZE)
    window.show()
    written = []
    try:
        for scheme, suffix in SCHEMES:
            window.theme.apply(scheme)  # this picture's scheme, whatever the settings or the OS say; nothing saved
            _spin(app, SETTLE_SECONDS)
            for spec in window.specs:
                panel = _open(app, window, spec.key)
                for name, scene in _pictures(spec.key):
                    shown = scene(panel, services, app) or window  # a scene may open a dialog to picture
                    _spin(app, SETTLE_SECONDS)
                    written.append(_save(shown, out_dir / f"{name}{suffix}.png"))
                    if shown is not window:
                        shown.close()
            written.append(_shoot_first_start(app, window, out_dir / f"{FIRST_START}{suffix}.png"))
    finally:
        window.close()
    return written


def _pictures(key: str) -> list[tuple[str, Callable[[Any, Any, Any], Any]]]:
    """A panel's pictures in order, each with its file name and the scene that sets it up."""
    return [(key, SCENES.get(key, lambda *_: None)), *EXTRA_PICTURES.get(key, ())]


def _save(window: Any, path: Path) -> Path:
    if not window.grab().save(str(path), "PNG"):
        raise OSError(f"could not write {path}")
    return path


def _shoot_first_start(app: Any, window: Any, path: Path) -> Path:
    """The welcome screen a first start shows. Opened by hand (the sample folder has a model); closing it here is
    not recorded as the user having seen it."""
    dialog = window.show_onboarding()
    dialog.finished.disconnect()
    _spin(app, READY_TIMEOUT, until=lambda: "Recommended for" in dialog.model.text())
    _spin(app, SETTLE_SECONDS)
    saved = dialog.grab().save(str(path), "PNG")
    dialog.hide()
    if not saved:
        raise OSError(f"could not write {path}")
    return path


def _sample_folder(embedder: Any) -> Path:
    from app.services.sample_data import build_sample_data
    if embedder is None:
        from core.config import Settings
        from models.embeddings import load_embedder
        embedder = load_embedder(Settings().embedder)
    folder = Path(tempfile.mkdtemp(prefix="engram-sample-")) / "data"
    build_sample_data(folder, embedder)
    return folder


def _open(app: Any, window: Any, key: str) -> Any:
    """Show a panel and wait until its first background read has been drawn."""
    ready = {"done": False}
    existing = window.panels.get(key)
    panel = window.show_panel(key)
    if existing is None:
        for name in READY_SIGNALS:
            signal = getattr(panel, name, None)
            if signal is not None:
                signal.connect(lambda *_: ready.update(done=True))
        if any(hasattr(panel, n) for n in READY_SIGNALS):
            _spin(app, READY_TIMEOUT, until=lambda: ready["done"])
    _spin(app, SETTLE_SECONDS)
    return panel


def _spin(app: Any, seconds: float, until: Optional[Callable[[], bool]] = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until()):
        app.processEvents()
        time.sleep(0.01)


# -- what each panel shows in its picture (public methods only) ------------------------------------------
from app.ui.screenshot_scenes import chat_controls_scene, model_settings_scene  # noqa: E402 - after the helpers
def _chat_scene(panel: Any, services: Any, _app: Any) -> None:
    latest = services.db.scalar("SELECT id FROM sessions WHERE deleted_at IS NULL ORDER BY updated_at DESC LIMIT 1")
    if latest is not None:
        panel.open_session(latest)
        panel.sessions.select(latest)


def _memories_scene(panel: Any, services: Any, app: Any) -> None:
    """Every memory, with the one a move replaced selected: its history says what replaced it."""
    replaced = services.db.scalar("SELECT id FROM memories WHERE superseded_by IS NOT NULL ORDER BY id LIMIT 1")
    panel.status.setCurrentText("all")
    if replaced is not None:
        _spin(app, READY_TIMEOUT, until=lambda: any(m.id == replaced for m in panel.model.memories))
        panel.select_memory(replaced)


def _memories_about_scene(panel: Any, _services: Any, _app: Any) -> None:
    """The simple view a first visit shows: what Engram believes about the user, in sentences (not saved)."""
    panel.set_view("simple", remember=False)


def _graph_scene(panel: Any, _services: Any, _app: Any) -> None:
    """The most important memory selected, as a click does: its node and its neighbours highlighted, with their
    labels, and the whole graph still in view (select_memory would centre it and cut the graph's edge off)."""
    memories = [node for node in panel.view.nodes if node.memory_id is not None]
    if memories:
        panel.select_node(max(memories, key=lambda node: node.importance))


def _hypotheses_scene(panel: Any, _services: Any, _app: Any) -> None:
    if panel.view.hypotheses:
        panel.select_hypothesis(panel.view.hypotheses[0].id)


def _timeline_scene(panel: Any, _services: Any, _app: Any) -> None:
    if panel.view.upcoming:
        panel.select_item(panel.view.upcoming[0].key)


SCENES: dict[str, Callable[[Any, Any, Any], None]] = {"chat": _chat_scene, "memories": _memories_scene,
                                                 "graph": _graph_scene, "hypotheses": _hypotheses_scene,
                                                 "timeline": _timeline_scene}
# a panel's further pictures, taken after its own: (file name, scene)
EXTRA_PICTURES: dict[str, tuple[tuple[str, Callable[[Any, Any, Any], Any]], ...]] = {
    "chat": (("chat-controls", chat_controls_scene),),
    "memories": (("memories-about", _memories_about_scene),),
    "models": (("model-settings", model_settings_scene),)}
