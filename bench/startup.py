"""Start-up time: from launching `engram` (no arguments: the GUI) to the main window shown, offscreen.

    python bench/startup.py [--repeats 5]

Each run is a fresh process on a fresh data folder. The app starts through its real entry point
(app.__main__.main); the driver only wraps QApplication.exec so that, on the event loop's first turn after the
window was shown, it prints the time and which heavy modules were already imported, then quits. The baseline,
measured in the same run, is a process that imports PySide6 and shows an empty QMainWindow: the floor for any
Qt app on this machine. Two cases: a first start (no model chosen: the Models panel opens) and a start with a
chosen model (the Chat panel opens; the model itself loads only when the first message is sent).
Prints JSON; the target is the window visible within 2 s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 2.0
HEAVY = ("mlx.core", "mlx_lm", "torch", "sentence_transformers", "transformers", "huggingface_hub", "pyqtgraph")

_REPORT = """
import json, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

def _report(app):
    shown = [w.windowTitle() for w in app.topLevelWidgets() if w.isVisible()]
    print("STARTUP " + json.dumps({"at": time.time(), "shown": shown,
                                   "heavy": [m for m in %(heavy)r if m in sys.modules]}), flush=True)
    app.quit()
"""

DRIVER = _REPORT + """
_exec = QApplication.exec
def _exec_and_report(*_args):  # exec is static in PySide6; called as app.exec() it gets the instance
    app = QApplication.instance()
    QTimer.singleShot(0, lambda: _report(app))
    return _exec()
QApplication.exec = _exec_and_report
from app.__main__ import main
sys.exit(main([]))
"""

BASELINE = _REPORT + """
from PySide6.QtWidgets import QMainWindow
app = QApplication(sys.argv[:1])
window = QMainWindow()
window.setWindowTitle("baseline")
window.resize(1180, 760)
window.show()
QTimer.singleShot(0, lambda: _report(app))
app.exec()
"""


def run_once(code: str, home: Path) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ENGRAM_HOME=str(home), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(ROOT))
    started = time.time()
    done = subprocess.run([sys.executable, "-c", code % {"heavy": HEAVY}], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    line = next((x for x in done.stdout.splitlines() if x.startswith("STARTUP ")), None)
    if line is None:
        raise RuntimeError(f"the app did not report a shown window:\n{done.stdout}\n{done.stderr[-2000:]}")
    report = json.loads(line[len("STARTUP "):])
    return {"seconds": report["at"] - started, "shown": report["shown"], "heavy": report["heavy"]}


def fresh_home(parent: Path, *, with_model: bool) -> Path:
    home = Path(tempfile.mkdtemp(dir=parent))
    if with_model:
        model = home / "models" / "chosen"  # a chosen model: the Chat panel opens; nothing loads until a message
        model.mkdir(parents=True)
        (home / "settings.json").write_text(json.dumps({"chat_model": str(model)}), encoding="utf-8")
    return home


def measure(code: str, repeats: int, *, with_model: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as parent:
        runs = [run_once(code, fresh_home(Path(parent), with_model=with_model)) for _ in range(repeats)]
    seconds = sorted(r["seconds"] for r in runs)
    return {"median_s": round(statistics.median(seconds), 3), "max_s": round(seconds[-1], 3),
            "runs_s": [round(s, 3) for s in seconds], "window_shown": all(r["shown"] for r in runs),
            "heavy_modules_at_show": sorted({m for r in runs for m in r["heavy"]})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.meta import stamp
    header = stamp("startup")
    baseline = measure(BASELINE, args.repeats)
    first_start = measure(DRIVER, args.repeats)
    with_model = measure(DRIVER, args.repeats, with_model=True)
    worst = max(first_start["median_s"], with_model["median_s"])
    print(json.dumps({**header, "target_s": TARGET_SECONDS, "baseline_empty_qt_window": baseline,
                      "engram_first_start": first_start, "engram_with_model_chosen": with_model,
                      "overhead_over_baseline_s": round(worst - baseline["median_s"], 3),
                      "meets_target": worst <= TARGET_SECONDS}, indent=2))


if __name__ == "__main__":
    main()
