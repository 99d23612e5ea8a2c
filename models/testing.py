"""Builds real, tiny MLX chat-model folders for tests and benchmarks, with no network.

The folder holds a byte-level BPE tokenizer trained here (special tokens and a ChatML chat template in
tokenizer_config.json), random qwen2 weights saved as mlx-lm saves them, and a 4-bit copy quantized as
mlx-lm's quantizer does (models.mlx_saving, which imports no transformers). Everything that loads a real model
(chat, structured output, adapters) runs on it.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
EOS_TOKEN = "<|im_end|>"
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

# ChatML, as Qwen models use it; mlx-lm applies it through the Hugging Face tokenizer.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_WORDS = (
    "the a an I you we they he she it is are was were be have has do does not and or but if then so because "
    "name age city likes lives works friend family dog cat coffee tea music book film sport run walk swim read "
    "write code python memory remember forget user assistant hello thanks please yes no maybe today tomorrow "
    "morning evening week year Paris London Berlin Tokyo red blue green small large happy sad fact true false "
    "{ } [ ] : , \" 0 1 2 3 4 5 6 7 8 9 null subject predicate object confidence statement"
).split()


@dataclass(frozen=True)
class TinyModelSpec:
    vocab_size: int = 512
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 128
    context_length: int = 2048
    seed: int = 0
    weight_scale: float = 4.0  # default init gives near-uniform logits and one repeated token; this varies output
    corpus_lines: int = 2000  # the tokenizer's training text; 300 lines still reach a 512-token vocabulary


def synthetic_corpus(lines: int, seed: int = 0) -> list[str]:
    """Plain sentences and JSON-like lines, enough for BPE merges over words and punctuation."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        words = rng.choices(_WORDS, k=rng.randint(4, 16))
        corpus.append(" ".join(words))
        corpus.append(json.dumps({rng.choice(_WORDS): rng.choice(_WORDS), "n": rng.randint(0, 999)}))
    return corpus


def build_tokenizer(folder: Path, vocab_size: int, *, corpus_lines: int = 2000, seed: int = 0,
                    extra_words: int = 0) -> None:
    """Train a byte-level BPE tokenizer and save it with a chat template as a Hugging Face tokenizer folder.

    `extra_words` adds that many programmatic pseudo-words, so a large vocabulary (100k+) can be reached
    without any downloaded text.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    lines = synthetic_corpus(corpus_lines, seed)
    if extra_words:
        lines.extend(_pseudo_words(extra_words, seed))
    tokenizer.train_from_iterator(lines, trainer=trainer)
    # Saved with Qwen2's normalizer and split, which transformers 5 puts in place of the file's for any qwen2
    # folder: the file then says what mlx-lm reads through transformers (models.chat_tokenizer reads the file)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_SPLIT), "isolated"),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                use_regex=False)])
    # as transformers' save writes it: no bos, no eos added
    tokenizer.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1", special_tokens=[])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    _write_tokenizer_config(folder)


def _write_tokenizer_config(folder: Path) -> None:
    """What transformers 5's save_pretrained writes beside tokenizer.json (no transformers import: `--self-check`
    builds this model), with the template in tokenizer_config.json too, where older transformers read it."""
    config = {"backend": "tokenizers", "bos_token": None, "eos_token": EOS_TOKEN, "model_max_length": int(1e30),
              "pad_token": "<|endoftext|>", "tokenizer_class": "TokenizersBackend", "unk_token": None,
              "chat_template": CHAT_TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")


def _is_matrix(path: str) -> bool:
    return path.endswith("weight") and "norm" not in path


def _pseudo_words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    # each pseudo-word repeated so BPE merges it into one token
    words = ("".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(count))
    return [" ".join([w] * 3) for w in words]


def qwen2_config(spec: TinyModelSpec, vocab_size: int) -> dict:
    return {
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "intermediate_size": spec.intermediate_size,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": spec.context_length,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def build_tiny_model(folder: Path | str, spec: TinyModelSpec = TinyModelSpec(), *,
                     quantize_bits: int | None = 4, tokenizer_dir: Path | None = None) -> Path:
    """Write a loadable mlx-lm model folder; with `quantize_bits`, the weights are quantized (group size 32).

    `tokenizer_dir` reuses an already trained tokenizer folder (training a 100k vocabulary takes a while).
    """
    import mlx.core as mx
    from mlx.utils import tree_map_with_path
    from tokenizers import Tokenizer

    from models import mlx_lm_package
    from models.mlx_saving import quantize, save_config, save_model
    mlx_lm_package.install()  # the model module without mlx-lm's __init__ (and transformers)
    from mlx_lm.models import qwen2

    folder = Path(folder)
    if tokenizer_dir is None:
        build_tokenizer(folder, spec.vocab_size, corpus_lines=spec.corpus_lines, seed=spec.seed)
        tokenizer_dir = folder
    if Path(tokenizer_dir) != folder:
        folder.mkdir(parents=True, exist_ok=True)
        for name in (n for n in TOKENIZER_FILES if (Path(tokenizer_dir) / n).is_file()):
            shutil.copyfile(Path(tokenizer_dir) / name, folder / name)
    vocab_size = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size(with_added_tokens=True)
    config = qwen2_config(spec, vocab_size=vocab_size)
    mx.random.seed(spec.seed)
    model = qwen2.Model(qwen2.ModelArgs.from_dict(config))
    model.update(tree_map_with_path(
        lambda path, value: value * spec.weight_scale if _is_matrix(path) else value, model.parameters()))
    mx.eval(model.parameters())
    if quantize_bits:
        config = quantize(model, config, group_size=32, bits=quantize_bits)
    save_model(folder, model)
    save_config(config, folder / "config.json")
    return folder


def write_random_adapter(model_dir: Path | str, adapter_dir: Path | str, *, rank: int = 4,
                         scale: float = 8.0, num_layers: int = 2, seed: int = 1) -> Path:
    """A LoRA adapter with non-zero random weights for the model in `model_dir`, in mlx-lm's adapter format.

    A freshly initialised LoRA has lora_b = 0 (no effect); random lora_b makes the adapter change the output,
    which is what switching and removal tests need to see.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm import load
    from mlx_lm.tuner.utils import linear_to_lora_layers

    loaded: Any = load(str(model_dir))  # (model, tokenizer): mlx-lm annotates a union with return_config's triple
    model = loaded[0]
    params = {"rank": rank, "scale": scale, "dropout": 0.0}
    linear_to_lora_layers(model, num_layers, params)
    mx.random.seed(seed)
    flat = cast(list[tuple[str, Any]], tree_flatten(model.parameters()))  # a list, without `destination`
    weights = {name: mx.random.normal(value.shape) * 0.5
               for name, value in flat if name.rsplit(".", 1)[-1] in ("lora_a", "lora_b")}
    adapter_dir = Path(adapter_dir)
    adapter_dir.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(adapter_dir / "adapters.safetensors"), weights)
    config = {"fine_tune_type": "lora", "num_layers": num_layers, "lora_parameters": params}
    (adapter_dir / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    return adapter_dir
