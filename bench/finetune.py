"""Training speed: Engram's fine-tune worker against plain `mlx_lm lora`, same model, data and settings.

    python bench/finetune.py [--model FOLDER] [--iters 200] [--repeats 2]

Both run as separate processes on the same train/valid files with the same LoRA and tuner settings, saving
every 20 steps as Engram does in production (Engram's save adds the optimizer state, so a run can resume).
Two figures: the tuner's own tokens/s over training steps (validation and loading excluded; the first
report of each run dropped for graph compilation), and the wall time of the whole process, which also
counts what the tuner's clock leaves out: Engram's batch wrapper, progress events and checkpoints. Both
processes train the same tokens, so the wall ratio is plain time / Engram time. Prints JSON; target: both
ratios >= 0.95.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.finetune.dataset import build_training_set  # noqa: E402
from core.store.db import open_memory_db  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from models.finetune import run_worker  # noqa: E402
from bench.meta import stamp  # noqa: E402

# One line of mlx-lm's training table: "  10    2.345 ▼    1,234    12.3k".
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_REPORT = re.compile(r"^\s*(\d+)\s+([\d.]+|nan)\s+\S\s+([\d,]+)\s+([\d.]+)k\s*$")
SETTINGS = dict(batch_size=4, learning_rate=1e-4, rank=8, scale=20.0, dropout=0.0, num_layers=2,
                max_seq_length=512, steps_per_report=10, seed=0, val_batches=1, steps_per_eval=100000, save_every=20)


def write_data(folder: Path, facts: int) -> int:
    db = open_memory_db()
    for i in range(facts):
        add_memory(db, f"The user's friend number {i} lives in city {i * 7 % 13} and likes tea.",
                   subject=f"friend {i}", relation="home", confidence=0.9)
    training = build_training_set(db)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in training.examples]
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "valid.jsonl").write_text("\n".join(lines[:8]) + "\n")
    return len(lines)


def engram_rates(model: str, data: Path, out: Path, iters: int) -> tuple[list[float], float]:
    config = {**SETTINGS, "model": model, "data_dir": str(data), "adapter_dir": str(out / "adapter"),
              "iters": iters, "mask_prompt": True}
    started = time.perf_counter()
    result = run_worker("train", config, out)
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"engram worker failed: {result.error()}")
    return [e["tokens_per_second"] for e in result.events if e["event"] == "report"], wall


def mlx_lm_rates(model: str, data: Path, out: Path, iters: int) -> tuple[list[float], float]:
    import yaml
    config = {"model": model, "train": True, "data": str(data), "adapter_path": str(out / "adapter"),
              "iters": iters, "batch_size": SETTINGS["batch_size"], "learning_rate": SETTINGS["learning_rate"],
              "num_layers": SETTINGS["num_layers"], "max_seq_length": SETTINGS["max_seq_length"],
              "steps_per_report": SETTINGS["steps_per_report"], "steps_per_eval": SETTINGS["steps_per_eval"],
              "val_batches": SETTINGS["val_batches"], "save_every": SETTINGS["save_every"], "seed": SETTINGS["seed"],
              "mask_prompt": True, "fine_tune_type": "lora", "optimizer": "adam",
              "lora_parameters": {k: SETTINGS[k] for k in ("rank", "scale", "dropout")}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "lora.yaml").write_text(yaml.safe_dump(config))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mlx_lm", "lora", "-c", str(out / "lora.yaml")],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"mlx_lm lora failed:\n{done.stderr[-2000:]}")
    reports = map(_REPORT.match, _ANSI.sub("", done.stdout).splitlines())
    rates = [float(m.group(3).replace(",", "")) for m in reports if m]
    if not rates:
        raise SystemExit(f"no training reports in mlx_lm output:\n{done.stdout[-2000:]}")
    return rates, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="model folder (default: build the tiny test model)")
    parser.add_argument("--iters", type=int, default=200)  # training, not loading, fills the wall time
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    header = stamp("finetune")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model
        if model is None:
            from models.testing import build_tiny_model
            model = str(build_tiny_model(tmp / "tiny"))
        examples = write_data(tmp / "data", args.facts)
        engram, plain, engram_wall, plain_wall = [], [], [], []
        for r in range(args.repeats):  # alternate, so drift on a shared machine hits both alike
            rates, wall = mlx_lm_rates(model, tmp / "data", tmp / f"plain{r}", args.iters)
            plain, plain_wall = plain + rates[1:], plain_wall + [wall]
            rates, wall = engram_rates(model, tmp / "data", tmp / f"engram{r}", args.iters)
            engram, engram_wall = engram + rates[1:], engram_wall + [wall]
    e, p = statistics.median(engram), statistics.median(plain)
    wall_ratio = statistics.median(plain_wall) / statistics.median(engram_wall)
    print(json.dumps({**header, "model": args.model or "tiny-4bit", "examples": examples,
                      "iters": args.iters, "repeats": args.repeats, "settings": SETTINGS,
                      "engram_tokens_per_second": round(e, 1), "mlx_lm_tokens_per_second": round(p, 1),
                      "ratio": round(e / p, 3), "engram_wall_seconds": [round(w, 2) for w in engram_wall],
                      "mlx_lm_wall_seconds": [round(w, 2) for w in plain_wall], "wall_ratio": round(wall_ratio, 3),
                      "target_ratio": 0.95, "meets_target": e / p >= 0.95 and wall_ratio >= 0.95}, indent=2))


if __name__ == "__main__":
    main()
