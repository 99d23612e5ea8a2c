"""Curated 4-bit MLX chat models from mlx-community, what each needs, and whether it fits this machine.

A model's need is counted in one place, `need_estimate`: its weights, plus the KV cache of a typical conversation
(TYPICAL_CONTEXT_TOKENS, fp16 keys and values for every layer), plus OVERHEAD_BYTES for MLX's runtime, activations and
the tokenizer. The verdict compares it with the memory budget (models.budget: on a Mac what the GPU may use, else the
memory free): under 75% it fits, to 85% it is tight, above that it is too big.

A fine-tune loads a second copy of the model in its worker process while the app may keep its own for chat:
`finetune_fit` counts both, and says whether training fits beside the chat model, only once the chat model is
unloaded (it is loaded again at the next reply), or not at all (issue 36.9).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

GB = 1024 ** 3
FITS, TIGHT, TOO_BIG = "fits", "tight", "too big"
FITS_SHARE = 0.75  # under this share of the budget the rest of the machine stays responsive
TIGHT_SHARE = 0.85  # past this, a long conversation or another app pushes it into swap
TYPICAL_CONTEXT_TOKENS = 8192  # Settings' default context window (core.config) for a conversation with memories
KV_BYTES_PER_VALUE = 2  # MLX keeps the KV cache in fp16 even for 4-bit weights
OVERHEAD_BYTES = GB // 2  # MLX runtime, activations of one step, tokenizer and Python
FALLBACK_KV_SHARE = 0.2  # a config without the attention sizes: its KV cache guessed as a fifth of its weights


BESIDE_CHAT, WITHOUT_CHAT = "beside chat", "without chat"  # finetune_fit's verdicts, with TOO_BIG
TRAIN_TOKENS = 256  # one training example (a fact in a short exchange) as the batch pads it
ACTIVATION_VALUES = 34  # fp16 values kept per token, hidden unit and trained layer for the backward pass (the
#                         34·s·b·h of Korthikanti et al. 2022 without attention scores; mlx's fused attention)


@dataclass(frozen=True)
class ModelInfo:
    repo_id: str
    family: str
    params_b: float
    size_bytes: int
    context_length: int
    ram_bytes: int  # need_estimate: the memory it uses while chatting at a typical context
    hidden_size: int = 0
    layers: int = 0

    @property
    def name(self) -> str:
        return self.repo_id.rsplit("/", 1)[-1]


def _info(repo_id: str, family: str, params_b: float, size_gb: float, context: int,
          layers: int, kv_heads: int, head_dim: int, hidden: int) -> ModelInfo:
    size = int(size_gb * GB)
    kv = 2 * layers * kv_heads * head_dim * KV_BYTES_PER_VALUE
    return ModelInfo(repo_id, family, params_b, size, context, need_estimate(size, kv, context), hidden, layers)


def training_need(weights_bytes: int, hidden_size: int, layers: int, *, trained_layers: int = 16,
                  batch_size: int = 4) -> int:
    """What the fine-tune's worker process uses: its own copy of the weights, the activations the backward pass
    keeps for the LoRA layers (the last `trained_layers`) over a batch of TRAIN_TOKENS-token examples, and the
    runtime overhead. The adapter and its optimizer state are a few MB."""
    trained = min(trained_layers, layers) if trained_layers > 0 else layers
    activations = batch_size * TRAIN_TOKENS * hidden_size * trained * ACTIVATION_VALUES * KV_BYTES_PER_VALUE
    return weights_bytes + activations + OVERHEAD_BYTES


def training_need_for_folder(folder: Path, *, trained_layers: int = 16, batch_size: int = 4) -> int:
    """training_need for a model folder (its config.json's sizes; a config without them counts as 4096 × 32)."""
    config = _read_config(folder)
    text = nested if isinstance(nested := config.get("text_config"), dict) else config
    hidden, layers = text.get("hidden_size"), text.get("num_hidden_layers")
    return training_need(folder_weights_bytes(folder), hidden if isinstance(hidden, int) else 4096,
                         layers if isinstance(layers, int) else 32, trained_layers=trained_layers,
                         batch_size=batch_size)


def finetune_fit(chat_need: int, train_need: int, budget: int) -> str:
    """Whether a fine-tune may run: BESIDE_CHAT when it and the loaded chat model (`chat_need`, 0 when none is
    loaded) fit together, WITHOUT_CHAT when it fits once the chat model is unloaded, else TOO_BIG. The limit is
    TIGHT_SHARE of the budget: the user is away, but past it Metal swaps or fails the run."""
    if budget <= 0:
        return BESIDE_CHAT  # unknown memory: neither promise nor refuse, as `fit` does
    limit = budget * TIGHT_SHARE
    if chat_need + train_need <= limit:
        return BESIDE_CHAT
    return WITHOUT_CHAT if train_need <= limit else TOO_BIG


def need_estimate(weights_bytes: int, kv_per_token: int | None, context_length: int = 0) -> int:
    """Weights + KV cache of a typical context (at most the model's own window) + runtime overhead."""
    tokens = min(TYPICAL_CONTEXT_TOKENS, context_length) if context_length > 0 else TYPICAL_CONTEXT_TOKENS
    kv_cache = kv_per_token * tokens if kv_per_token else int(weights_bytes * FALLBACK_KV_SHARE)
    return weights_bytes + kv_cache + OVERHEAD_BYTES


def kv_bytes_per_token(config: dict) -> int | None:
    """KV cache bytes one token costs, from a model's config.json (multimodal configs nest it in text_config)."""
    text = nested if isinstance(nested := config.get("text_config"), dict) else config
    layers, heads = text.get("num_hidden_layers"), text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim")
    if not head_dim and isinstance(text.get("hidden_size"), int) and isinstance(heads, int) and heads > 0:
        head_dim = text["hidden_size"] // heads
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and isinstance(head_dim, int)
            and min(layers, kv_heads, head_dim) > 0):
        return None
    return 2 * layers * kv_heads * head_dim * KV_BYTES_PER_VALUE


def need_for_folder(folder: Path) -> int:
    """need_estimate for a model folder: its weights on disk and its own attention sizes."""
    config = _read_config(folder)
    context = config.get("max_position_embeddings")
    return need_estimate(folder_weights_bytes(folder), kv_bytes_per_token(config),
                         context if isinstance(context, int) else 0)


def _read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


# Repo ids confirmed on huggingface.co/mlx-community; sizes rounded up from the repos' file listings; layers, KV
# heads, head size and hidden size from each model's config.json (Gemma 3's sliding-window layers make its figure
# an upper bound).
CURATED: tuple[ModelInfo, ...] = (
    _info("mlx-community/Qwen3-0.6B-4bit", "Qwen3", 0.6, 0.36, 32768, 28, 8, 128, 1024),
    _info("mlx-community/gemma-3-1b-it-4bit", "Gemma 3", 1.0, 0.78, 32768, 26, 1, 256, 1152),
    _info("mlx-community/Llama-3.2-1B-Instruct-4bit", "Llama 3.2", 1.2, 0.72, 131072, 16, 8, 64, 2048),
    _info("mlx-community/Llama-3.2-3B-Instruct-4bit", "Llama 3.2", 3.2, 1.85, 131072, 28, 8, 128, 3072),
    _info("mlx-community/Qwen3-4B-4bit", "Qwen3", 4.0, 2.3, 32768, 36, 8, 128, 2560),
    _info("mlx-community/gemma-3-4b-it-4bit-DWQ", "Gemma 3", 4.3, 2.6, 131072, 34, 4, 256, 2560),
    _info("mlx-community/Qwen3-8B-4bit", "Qwen3", 8.2, 4.65, 32768, 36, 8, 128, 4096),
)

# Best first: the default is the first of these that fits.
DEFAULT_PREFERENCE = (
    "mlx-community/Qwen3-8B-4bit",
    "mlx-community/Qwen3-4B-4bit",
    "mlx-community/Llama-3.2-3B-Instruct-4bit",
    "mlx-community/Llama-3.2-1B-Instruct-4bit",
    "mlx-community/Qwen3-0.6B-4bit",
)


def find_model(name_or_repo: str, catalog: Sequence[ModelInfo] = CURATED) -> ModelInfo | None:
    wanted = name_or_repo.lower()
    for info in catalog:
        if wanted in (info.repo_id.lower(), info.name.lower()):
            return info
    return None


def fit(need: int, budget: int) -> str:
    """FITS under 75% of the memory budget (models.budget), TIGHT to 85%, TOO_BIG above."""
    if budget <= 0:
        return TIGHT  # unknown memory: neither promise nor refuse
    if need < budget * FITS_SHARE:
        return FITS
    if need <= budget * TIGHT_SHARE:
        return TIGHT
    return TOO_BIG


def default_model(budget: int, catalog: Sequence[ModelInfo] = CURATED, speed: Any = None) -> ModelInfo:
    """The best preferred model that fits the budget comfortably and, when this machine's speed is known
    (models.speed.MachineSpeed), answers at a readable pace; else the fastest that fits; the smallest when none
    fits. Fit alone recommended the 4.6 GB Qwen3-8B to a 2-core CPU that writes it at a word every few seconds."""
    from models.speed import READABLE
    fitting = [info for info in (find_model(r, catalog) for r in DEFAULT_PREFERENCE)
               if info is not None and fit(info.ram_bytes, budget) == FITS]
    if speed is not None:
        readable = [i for i in fitting if (speed.model_pace(i) or 0.0) >= READABLE]
        if readable:
            return readable[0]
        if fitting:
            return max(fitting, key=lambda info: speed.model_pace(info) or 0.0)  # the fastest that fits
    if fitting:
        return fitting[0]
    return min(catalog, key=lambda info: info.ram_bytes)


def parse_meminfo(text: str) -> int:
    """Bytes of MemTotal in Linux /proc/meminfo text (reported there in kB); 0 if absent."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            unit = fields[2].lower() if len(fields) > 2 else "kb"
            return int(fields[1]) * (1024 if unit == "kb" else 1)
    return 0


def parse_sysctl_memsize(text: str) -> int:
    """Bytes from `sysctl hw.memsize` output, with or without the `hw.memsize:` prefix; 0 if unreadable."""
    value = text.strip().rsplit(":", 1)[-1].strip()
    return int(value) if value.isdigit() else 0


def total_ram_bytes(platform: str | None = None, *, meminfo: Path = Path("/proc/meminfo"),
                    run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> int:
    """This machine's physical memory in bytes; 0 when it cannot be read."""
    platform = sys.platform if platform is None else platform
    try:
        if platform == "darwin":
            done = run(["sysctl", "-n", "hw.memsize"], capture_output=True, text=True, timeout=5, check=False)
            return parse_sysctl_memsize(done.stdout)
        return parse_meminfo(meminfo.read_text(encoding="ascii", errors="replace"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def folder_weights_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))
