"""The fine-tuning process: `python -m models.train_worker train|evaluate CONFIG.json`.

It runs apart from the app (a crash here cannot take the app down) and speaks JSON lines on its original
stdout; the tuner's own console output goes to /dev/null. SIGTERM means "stop": the worker saves a
checkpoint (adapter weights, optimizer state, step) before the next step and exits with CANCELLED, and a
later run with "resume": true continues from it. A loss that stops being a number ends the run (DIVERGED)
without saving it.
"""
from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, cast

from models.cpu_blas import preload_fast_blas
from models.mlx_lm_package import keep_torch_out
from models.adapter_scores import gate_scores
from models.parent_guard import stop_with_parent, watch_parent  # noqa: F401 - watch_parent: tests use it here
from models.prompt_text import control_markers, neutralise

EXIT_OK, EXIT_FAILED, EXIT_CANCELLED, EXIT_DIVERGED = 0, 1, 3, 4
CHECKPOINT = "checkpoint"


class Cancelled(Exception):
    pass


class Diverged(Exception):
    pass


class Reporter:
    """JSON lines on a private copy of the original stdout, so nothing the tuner prints can corrupt them."""

    def __init__(self) -> None:
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        sys.stdout = open(os.devnull, "w")

    def emit(self, event: str, **data: Any) -> None:
        self._out.write(json.dumps({"event": event, **data}) + "\n")


def _load(config: dict):
    from mlx_lm import load

    from models.cpu_weights import dequantize_for_cpu
    loaded: Any = load(config["model"])  # (model, tokenizer): mlx-lm annotates a union with return_config's triple
    model, tokenizer = loaded
    dequantize_for_cpu(model)  # as the chat engine runs it: training and scoring read float32 on the CPU backend
    return model, tokenizer


def _chat_dataset(rows: list[dict], tokenizer: Any, mask_prompt: bool):
    """Training rows are the user's memories: their text is data, so no control token may come from it."""
    from mlx_lm.tuner.datasets import CacheDataset, ChatDataset
    markers = control_markers(tokenizer)
    safe = [{**row, "messages": [{**m, "content": neutralise(m["content"], markers)} for m in row["messages"]]}
            if "messages" in row else row for row in rows]
    return CacheDataset(ChatDataset(safe, tokenizer, mask_prompt=mask_prompt))


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _save_checkpoint(folder: Path, model: Any, optimizer: Any, step: int) -> None:
    """Adapter weights, optimizer state and step, written to a staging folder then renamed into place."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    staging = folder.with_name(folder.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(staging / "adapters.safetensors"), dict(tree_flatten(model.trainable_parameters())))
    mx.save_safetensors(str(staging / "optimizer.safetensors"), dict(tree_flatten(optimizer.state)))
    (staging / "state.json").write_text(json.dumps({"step": step}))
    if folder.exists():
        for old in folder.iterdir():
            old.unlink()
        folder.rmdir()
    staging.rename(folder)


def _restore_checkpoint(folder: Path, model: Any, optimizer: Any) -> int:
    import mlx.core as mx
    from mlx.utils import tree_unflatten
    model.load_weights(str(folder / "adapters.safetensors"), strict=False)
    optimizer.init(model.trainable_parameters())
    saved = cast(dict[str, Any], mx.load(str(folder / "optimizer.safetensors")))  # a .safetensors file: a dict
    optimizer.state = tree_unflatten(list(saved.items()))
    return int(json.loads((folder / "state.json").read_text())["step"])


def _progress_batches(batches: Iterator, *, start: int, total: int, stop: Callable[[], bool],
                      on_stop: Callable[[int], None], report: Reporter, last: dict,
                      early: Callable[[int], bool] = lambda step: False) -> Iterator:
    """Wraps the tuner's batch iterator: a batch is requested only after the previous step finished, so
    this is where per-step progress is reported, where a stop request is honoured, and where the early stop
    reads the gate's measures (ending the iterator ends training)."""
    t0 = time.perf_counter()
    step = start
    for batch in batches:
        if step > start:
            elapsed = time.perf_counter() - t0
            done = step - start
            report.emit("step", step=step, iters=total, loss=last.get("loss"),
                        tokens_per_second=last.get("tokens_per_second"),
                        eta_seconds=elapsed / done * (total - step))
            if early(step):
                return
        if stop():
            on_stop(step)
            raise Cancelled(step)
        step += 1
        yield batch


def _training_data(config: dict, tokenizer: Any, mask_prompt: bool) -> tuple[Any, Any, Any]:
    """(dataset, batch iterator, loss) for the run's objective: plain SFT, or ORPO over the preference pairs."""
    from mlx_lm.tuner.trainer import default_loss, iterate_batches

    from models.preference_pairs import orpo_loss, pair_batches, pair_tokens, with_self_pairs
    data = Path(config["data_dir"])
    examples = _read_jsonl(data / "train.jsonl")
    pairs_path = data / "pairs.jsonl"
    if config.get("objective", "sft") != "orpo" or not pairs_path.exists():
        return _chat_dataset(examples, tokenizer, mask_prompt), iterate_batches, default_loss
    markers = control_markers(tokenizer)
    rows = pair_tokens(with_self_pairs(_read_jsonl(pairs_path), examples), tokenizer,
                       lambda text: neutralise(text, markers))
    seed = int(config.get("seed", 0))

    def batches(dataset: Any, batch_size: int, max_seq_length: int, **_: Any) -> Iterator:
        return pair_batches(dataset, batch_size, max_seq_length, seed)
    return rows, batches, orpo_loss


def train(config: dict, report: Reporter) -> int:
    import mlx.core as mx
    import mlx.optimizers as optim
    import numpy as np
    from mlx_lm.tuner.callbacks import TrainingCallback
    from mlx_lm.tuner.trainer import TrainingArgs
    from mlx_lm.tuner.trainer import train as tuner_train
    from mlx_lm.tuner.utils import linear_to_lora_layers

    from models.early_stop import EarlyStop

    stop_requested = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.update(flag=True))
    parent = os.getppid()  # if the app dies, stop at the next step rather than train on as an orphan
    adapter_dir = Path(config["adapter_dir"])
    adapter_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = adapter_dir / CHECKPOINT
    mx.random.seed(config.get("seed", 0))
    np.random.seed(config.get("seed", 0))
    model, tokenizer = _load(config)
    model.freeze()
    lora = {"rank": config.get("rank", 8), "scale": config.get("scale", 20.0), "dropout": config.get("dropout", 0.0)}
    linear_to_lora_layers(model, config.get("num_layers", 16), lora)
    optimizer = optim.Adam(learning_rate=config.get("learning_rate", 1e-4))
    early = EarlyStop(config["early_stop"], adapter_dir, report.emit) if config.get("early_stop") else None
    if early is not None:
        early.start(model, tokenizer)  # before any step (and before a checkpoint is restored): the base model
    start = 0
    if config.get("resume") and (checkpoint / "state.json").exists():
        start = _restore_checkpoint(checkpoint, model, optimizer)
        report.emit("resumed", step=start)
    iters = int(config["iters"])
    mask_prompt = bool(config.get("mask_prompt", True))
    train_set, iterate, loss = _training_data(config, tokenizer, mask_prompt)
    valid_path = Path(config["data_dir"]) / "valid.jsonl"
    valid_set = _chat_dataset(_read_jsonl(valid_path), tokenizer, mask_prompt) if valid_path.exists() else None
    last: dict = {}
    save_every = int(config.get("save_every", 25))
    best_file = adapter_dir / "best.safetensors"

    def save_best() -> None:
        from mlx.utils import tree_flatten
        mx.save_safetensors(str(best_file), dict(tree_flatten(model.trainable_parameters())))

    def early_check(step: int) -> bool:
        if early is None or step % early.every:
            return False
        last["checked"] = step
        last["stopped_early"] = early.check(step, model, tokenizer, save_best)
        return last["stopped_early"]

    class Progress(TrainingCallback):
        def on_train_loss_report(self, info: dict) -> None:
            if not math.isfinite(info["train_loss"]):
                raise Diverged(f"loss became {info['train_loss']} at step {start + info['iteration']}")
            last.update(loss=info["train_loss"], tokens_per_second=info["tokens_per_second"],
                        step=start + info["iteration"])
            report.emit("report", step=start + info["iteration"], loss=info["train_loss"],
                        tokens_per_second=info["tokens_per_second"], trained_tokens=info["trained_tokens"])
            if (start + info["iteration"]) % save_every == 0:
                _save_checkpoint(checkpoint, model, optimizer, start + info["iteration"])
                report.emit("checkpoint", step=start + info["iteration"])

    def batches(**kwargs: Any) -> Iterator:
        return _progress_batches(iterate(**kwargs), start=start, total=iters,
                                 stop=lambda: stop_requested["flag"] or os.getppid() != parent,
                                 on_stop=lambda step: _save_checkpoint(checkpoint, model, optimizer, step),
                                 report=report, last=last, early=early_check)

    args = TrainingArgs(batch_size=min(int(config.get("batch_size", 4)), len(train_set)), iters=iters - start,
                        steps_per_report=int(config.get("steps_per_report", 10)),
                        steps_per_eval=int(config.get("steps_per_eval", 10 ** 9)),
                        val_batches=int(config.get("val_batches", 25)), steps_per_save=10 ** 9,
                        max_seq_length=int(config.get("max_seq_length", 2048)),
                        adapter_file=str(adapter_dir / "adapters.safetensors"))
    if iters - start > 0:
        tuner_train(model=model, optimizer=optimizer, train_dataset=train_set, val_dataset=valid_set, args=args,
                    loss=loss, iterate_batches=batches, training_callback=Progress())
    if early is not None:
        # The last weights unread (a run that ended between readings); not after an early stop, whose weights were
        # just read (its last loss report may be steps behind, and reading them again would mislabel the step).
        if not last.get("stopped_early") and last.get("checked") != last.get("step", iters) and start < iters:
            early.check(int(last.get("step", iters)), model, tokenizer, save_best)
        if best_file.exists():
            best_file.replace(adapter_dir / "adapters.safetensors")  # the best weights inside the margins
    (adapter_dir / "adapter_config.json").write_text(json.dumps(
        {"fine_tune_type": "lora", "num_layers": config.get("num_layers", 16), "lora_parameters": lora}))
    report.emit("done", step=last.get("step", iters), loss=last.get("loss"),
                best_step=(early.best or {}).get("step") if early else None)
    return EXIT_OK


def evaluate(config: dict, report: Reporter) -> int:
    """Score each adapter (null = the base model) on the held-out probes (overall and by kind), the general-text
    set and, when given, the known-fact probes."""
    from mlx_lm.tuner.utils import load_adapters, remove_lora_layers
    model, tokenizer = _load(config)
    results = []
    for adapter in config["adapters"]:
        if adapter:
            load_adapters(model, adapter)
        model.eval()
        results.append({"adapter": adapter, **gate_scores(model, tokenizer, config["probes"], config["general"],
                                                          config.get("known_facts") or [])})
        if adapter:
            remove_lora_layers(model)
    report.emit("scores", results=results)
    return EXIT_OK




def main(argv: list[str]) -> int:
    stop_with_parent()  # first: a parent killed while this process started leaves no orphan training
    os.umask(0o077)  # the adapter, optimizer state and checkpoints it writes hold what it learnt about the user
    preload_fast_blas()  # before mlx loads: training's float32 matmuls on an optimized BLAS (Linux)
    keep_torch_out()  # mlx-lm's tuner imports transformers, which would import torch (the `st` extra) for nothing
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group: the parent asks
    report = Reporter()                            # this process to checkpoint and stop (SIGTERM) instead
    if len(argv) != 2 or argv[0] not in ("train", "evaluate"):
        report.emit("error", message="usage: python -m models.train_worker train|evaluate CONFIG.json")
        return EXIT_FAILED
    try:
        config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        return (train if argv[0] == "train" else evaluate)(config, report)
    except Cancelled as exc:
        report.emit("cancelled", step=exc.args[0])
        return EXIT_CANCELLED
    except Diverged as exc:
        report.emit("error", message=str(exc), diverged=True)
        return EXIT_DIVERGED
    except Exception as exc:  # reported to the parent, which keeps the previous adapter
        report.emit("error", message=f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
