"""Install refuses a model that cannot speak: it reads a short fixed English text and must find it unsurprising.

Why: every other check looks at files and shapes, and a model whose weights are wrong passes them all. A
Qwen2.5-Coder-1.5B Q4_K_M file, read with wrong values by MLX, converted, built, bound every weight, rendered its chat
template, installed — and answered in garbage. Perplexity on plain English catches that whatever the cause
(a misread block type, a wrong rotary setting, a norm off by one): a working model finds ordinary sentences easy.

The bar, and the choice behind it: perplexity on PLAIN_ENGLISH (counted over the text's tokens after the first).
Working models measured here: SmolLM2-135M ~10, Gemma 3 270M ~20, Qwen2.5-0.5B ~12 (docs in the report of issue
40); the broken 1.5B reads it at thousands. A model of at least SPEAKING_PARAMETERS parameters must score under
WORKING_CEILING — several times the worst working model measured, so a quantized or unusual small model passes, and
far under the broken ones. A model smaller than that (a few million parameters: the random-weight test model, a toy)
has no English to measure: the tiny test model's random weights score ~500,000 on a 512-token vocabulary, worse than
guessing, as random weights must. It is held only to numbers that are numbers (a NaN or infinite score is refused at
any size). That is the honest line: this check can prove a real model broken; it cannot ask a toy to speak, and no
model is marked to skip it.

It runs in a process of its own (`python -m models.speech_check FOLDER`, one JSON line): the model is loaded whole,
which must neither hold the app's memory afterwards nor touch MLX from a download thread.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from core.errors import ModelError

REPO_ROOT = Path(__file__).resolve().parents[1]

PLAIN_ENGLISH = (
    "The weather was warm, so we walked to the park after lunch. My sister brought her dog, and we sat on a "
    "bench near the lake. Children were playing with a ball, and an old man was feeding the ducks. We talked "
    "about our plans for the summer. She wants to visit our grandparents in the country, and I would like to "
    "learn to swim. When the sun went down, we walked home and made dinner together."
)
SPEAKING_PARAMETERS = 30_000_000  # the smallest chat models released (SmolLM2-135M) are well above this
WORKING_CEILING = 100.0  # working models of 135M-1.5B parameters measured here score 10-25


@dataclass(frozen=True)
class SpeechScore:
    perplexity: float
    parameters: int
    vocabulary: int
    ceiling: float  # what a working model of this size scores under


def check_speaks(folder: Path | str, *, python: str = sys.executable, timeout: float = 1800.0) -> SpeechScore:
    """Score the model in `folder` in a worker process; refuse (ModelError, in a user's words) a model that reads
    plain English as no working model would, or that could not be scored at all."""
    folder = Path(folder)
    try:
        done = subprocess.run([python, "-m", "models.speech_check", str(folder)], cwd=REPO_ROOT, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ModelError(f"The model in {folder.name} could not be checked: reading a short text took over "
                         f"{timeout / 60:.0f} minutes. It was not installed.") from exc
    event = _last_event(done.stdout)
    if "error" in event:
        raise ModelError(str(event["error"]))
    if "perplexity" not in event:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise ModelError(f"The model in {folder.name} could not be checked: it stopped while reading a short text "
                         f"({last[:200]}). It was not installed.")
    score = SpeechScore(**{key: float(event[key]) for key in ("perplexity", "ceiling")},
                        parameters=int(event["parameters"]), vocabulary=int(event["vocabulary"]))
    if not speaks(score):
        raise ModelError(refusal(score))
    return score


def speaks(score: SpeechScore) -> bool:
    return math.isfinite(score.perplexity) and score.perplexity < score.ceiling  # NaN is not finite


def score_folder(folder: Path) -> SpeechScore:
    """Load the model as the chat engine does (float weights on the CPU backend where they fit) and score it."""
    from models.chat_tokenizer import load_tokenizer
    from models.cpu_weights import dequantize_for_cpu
    from models.mlx_loader import load_model, tokenizer_defaults
    try:
        model, config = load_model(folder)
        tokenizer = load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"), defaults=tokenizer_defaults(model))
    except Exception as exc:  # mlx-lm raises ValueError, KeyError, RuntimeError... for a bad folder
        raise ModelError(f"The model in {folder} does not load: {exc}") from exc
    dequantize_for_cpu(model)  # Linux: MLX's quantized CPU kernels take minutes for the text
    return score_model(model, tokenizer)


def score_model(model: Any, tokenizer: Any, text: str = PLAIN_ENGLISH) -> SpeechScore:
    import mlx.core as mx
    ids = tokenizer.encode(text)
    logits = model(mx.array([ids]))[0].astype(mx.float32)
    log_probs = logits[:-1] - mx.logsumexp(logits[:-1], axis=-1, keepdims=True)
    chosen = mx.take_along_axis(log_probs, mx.array(ids[1:])[:, None], axis=-1)
    mean = -cast(float, mx.mean(chosen).item())  # a float32 array's item
    perplexity = mean if math.isnan(mean) else math.exp(min(mean, 700.0))  # exp(700): the float's top
    vocabulary = int(logits.shape[-1])
    parameters = parameter_count(model)
    ceiling = WORKING_CEILING if parameters >= SPEAKING_PARAMETERS else math.inf  # a toy: numbers only
    return SpeechScore(perplexity, parameters, vocabulary, ceiling)


def parameter_count(model: Any) -> int:
    """The weights the model stands for (a quantized matrix counts the values it holds, not its packed words)."""
    from mlx.utils import tree_flatten
    total = 0
    for _, module in model.named_modules():
        bits = getattr(module, "bits", None)
        for name, value in cast(list[tuple[str, Any]], tree_flatten(module.parameters())):  # no `destination`
            if "." in name or name in ("scales", "biases"):
                continue  # a child's own parameters are counted with the child
            total += value.size * (32 // bits if bits and name == "weight" else 1)
    return total


def refusal(score: SpeechScore) -> str:
    if math.isnan(score.perplexity):
        reads = "cannot be scored (its outputs are not numbers) on plain English"
    else:
        reads = f"scores a perplexity of {_figure(score.perplexity)} on plain English"
    bar = (f"a working model of its size scores under {_figure(score.ceiling)}" if math.isfinite(score.ceiling)
           else "any model that computes gives a finite score")
    return f"This model's weights did not load correctly: it {reads} where {bar}. It was not installed."


def _figure(value: float) -> str:
    return "more than a million" if value > 1e6 else f"{value:,.0f}"


def _last_event(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a library's print
        if isinstance(event, dict):
            return event
    return {}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(json.dumps({"error": "usage: python -m models.speech_check FOLDER"}), flush=True)
        return 2
    from models.cpu_blas import preload_fast_blas
    from models.train_worker import watch_parent
    preload_fast_blas()  # before mlx loads, as in the app
    watch_parent(os.getppid())  # a check whose app is gone stops
    try:
        score = score_folder(Path(argv[0]))
    except ModelError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    print(json.dumps(asdict(score)), flush=True)  # json writes NaN and Infinity, and reads them back
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
