"""No runtime path imports torch unless the user chose a sentence-transformers model (issue 16.1).

Each check runs the real thing in a fresh interpreter and reads its sys.modules at the end. The CLI verbs that
embed (`memory add`, `search`, `import`) run with torch installed (it is here, as the tests' reference), so its
absence is the code's doing. `--self-check` and the window answering a turn also load the chat model; they run as
Engram is installed without the `st` extra — torch unavailable — and must succeed without reaching for
sentence-transformers. None of them imports transformers either (0.7 s of a cold start, and torch with it where
torch is installed): the chat path reads mlx-lm's model code and the tokenizer without it (models.mlx_lm_package,
models.chat_tokenizer).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_cli_imports import PROBE

ROOT = Path(__file__).resolve().parents[1]
TORCH = {"torch", "sentence_transformers"}
NOT_ON_THE_CHAT_PATH = {"transformers", "sentence_transformers"}
# As an install without the `st` extra: `import torch` fails, and transformers' find_spec check sees no torch.
WITHOUT_TORCH = "import sys\nsys.modules['torch'] = None\n"

GUI_PROBE = """
import json, sys
from pathlib import Path
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication
from app.services.wiring import Services
from app.ui.main_window import open_main_window
from core.config import GenerationSettings, Settings
from models.chat import ChatEngine
from models.testing import build_tiny_model

folder = Path(sys.argv[1])
app = QApplication([sys.argv[0]])
engine = ChatEngine.load(build_tiny_model(folder / "tiny-4bit"), context_tokens=2048)
settings = Settings().replace(generation=GenerationSettings(max_tokens=16))
services = Services(settings=settings, data_dir=folder / "home", chat=engine)  # the embedder: from settings
window = open_main_window(services)
window.show()
panel, loop, replies = window.panels["chat"], QEventLoop(), []
panel.reply_finished.connect(lambda reply: (replies.append(reply), loop.quit()))
QTimer.singleShot(240_000, loop.quit)
panel.send("Where does Ana live?")
loop.exec()
answered = bool(replies) and services.db.scalar("SELECT count(*) FROM episodes") == 1
embedder = type(services._embedder).__name__
panel.shutdown()
window.runner.shutdown(wait=True)
services.close()
print(json.dumps({"answered": answered, "embedder": embedder,
                  "modules": sorted({name.split('.')[0] for name in sys.modules})}))
"""


def _run(code: str, *args: str, timeout: int = 300) -> str:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_cli_verbs_that_embed_never_import_torch(tmp_path):
    data, other, export = str(tmp_path / "data"), str(tmp_path / "other"), str(tmp_path / "export.json")
    argvs = [["--data-dir", data, "memory", "add", "Ana's dog is called Biscuit"],
             ["--data-dir", data, "memory", "search", "what is the dog's name"],
             ["--data-dir", data, "memory", "export", export],
             ["--data-dir", other, "memory", "import", export]]
    loaded = set(json.loads(_run(PROBE, json.dumps(argvs))))
    assert "tokenizers" in loaded  # it did embed
    assert not loaded & TORCH, sorted(loaded & TORCH)


def test_the_self_check_never_imports_torch():
    loaded = set(json.loads(_run(WITHOUT_TORCH + PROBE, json.dumps([["--self-check"]]))))
    assert {"mlx", "mlx_lm", "tokenizers", "llguidance"} <= loaded
    assert not loaded & NOT_ON_THE_CHAT_PATH, sorted(loaded & NOT_ON_THE_CHAT_PATH)


def test_the_self_check_with_torch_installed_imports_neither_torch_nor_transformers():
    loaded = set(json.loads(_run(PROBE, json.dumps([["--self-check"]]))))
    assert "mlx_lm" in loaded and not loaded & (TORCH | NOT_ON_THE_CHAT_PATH)


CHAT_PROBE = """
import json, sys
from pathlib import Path
from core.protocols import ChatMessage, SamplingParams
from models.chat import ChatEngine
from models.testing import build_tiny_model

engine = ChatEngine.load(build_tiny_model(Path(sys.argv[1]) / "tiny-4bit"), context_tokens=2048)
chunks = list(engine.stream([ChatMessage("user", "Where does Ana live?")], SamplingParams.greedy(16)))
engine.unload()
print(json.dumps({"streamed": chunks[-1].finish_reason in ("stop", "length"),
                  "modules": sorted({name.split('.')[0] for name in sys.modules})}))
"""


def test_loading_the_chat_model_and_streaming_a_reply_never_imports_transformers(tmp_path):
    result = json.loads(_run(CHAT_PROBE, str(tmp_path)))
    assert result["streamed"] and "mlx_lm" in result["modules"]
    assert not set(result["modules"]) & (TORCH | NOT_ON_THE_CHAT_PATH), result["modules"]


def test_the_window_answers_a_turn_without_importing_torch(tmp_path):
    result = json.loads(_run(WITHOUT_TORCH + GUI_PROBE, str(tmp_path)))
    assert result["answered"] and result["embedder"] == "BertEmbedder"
    assert "PySide6" in result["modules"] and not set(result["modules"]) & NOT_ON_THE_CHAT_PATH
