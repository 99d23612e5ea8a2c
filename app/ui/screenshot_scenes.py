"""Pictures of the chat's controls for `engram --screenshots` (app/ui/screenshots.py): the sample's newest
conversation (app/services/sample_chat.py) as a reply looks while it is still being learned from, with its pace,
and a model's settings dialog. The transient states (a pace, "Learning from this…") are what a turn shows for a
few seconds; they are set here through the reply's own methods, as the chat sets them."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from app.ui.chat_turn import ReplyPace

SAMPLE_MODEL = "mlx-community/Qwen2.5-1.5B-Instruct-4bit"
SAMPLE_CONFIG = {"max_position_embeddings": 32768}  # as that model's files say
SAMPLE_GENERATION = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "repetition_penalty": 1.05}


def chat_controls_scene(panel: Any, _services: Any, _app: Any) -> None:
    """The last reply as it ends: its pace beside its buttons, Learning from this… with Skip under it."""
    replies = panel.replies()
    if not replies:
        return
    last = replies[-1]
    last.pace.setText(ReplyPace(0.62, 18.4, 96).words())
    last.set_learning(True)
    panel.thread_view.scroll_to_end()


def model_settings_scene(panel: Any, services: Any, _app: Any) -> Any:
    """Models → Model settings… for a model whose files give it its own defaults (a throwaway folder holding only
    those files; nothing is saved)."""
    from app.ui.model_settings import ModelSettingsDialog
    folder = Path(tempfile.mkdtemp(prefix="engram-sample-model-"))
    (folder / "config.json").write_text(json.dumps(SAMPLE_CONFIG), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps(SAMPLE_GENERATION), encoding="utf-8")
    dialog = ModelSettingsDialog(services, SAMPLE_MODEL, folder, panel)
    dialog.boxes["temperature"].setValue(0.4)  # one value changed from the model's 0.7
    dialog.resize(520, dialog.sizeHint().height())
    dialog.show()
    dialog.finished.connect(lambda _result: _remove(folder))
    return dialog


def _remove(folder: Path) -> None:
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
