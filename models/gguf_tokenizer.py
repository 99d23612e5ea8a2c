"""The tokenizer of a GGUF file as Hugging Face tokenizer files: tokenizer.json (byte-level BPE with the family's
pre-tokenizer, or Gemma 3's SentencePiece vocabulary; control tokens special) and tokenizer_config.json (chat
template, special tokens). Used by models.gguf.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import ModelError

# Pre-tokenizer split patterns, as the model families' own tokenizer.json files have them.
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = ("gpt2", "default", "smollm", "qwen2", "llama-bpe")


def scalar(meta: dict, key: str, default: Any = None) -> Any:
    """A metadata value as plain Python (mx.load gives numbers as 0-d arrays)."""
    value = meta.get(key, default)
    return value.item() if hasattr(value, "item") else value


def write_tokenizer(folder: Path, meta: dict, *, chat_template: str | None = None) -> None:
    """tokenizer.json and tokenizer_config.json (chat template, special tokens) from the GGUF metadata;
    `chat_template` is the family's, for a file that carries none."""
    tokenizer = build_tokenizer(meta)
    tokenizer.save(str(folder / "tokenizer.json"))
    tokens = meta["tokenizer.ggml.tokens"]

    def token(key: str) -> str | None:
        index = scalar(meta, f"tokenizer.ggml.{key}")
        return tokens[int(index)] if index is not None and 0 <= int(index) < len(tokens) else None

    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("bos_token_id"),
        "eos_token": token("eos_token_id"),
        "pad_token": token("padding_token_id") or token("eos_token_id"),
        "unk_token": token("unknown_token_id"),
        "add_bos_token": bool(scalar(meta, "tokenizer.ggml.add_bos_token", False)),
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(scalar(meta, f"{scalar(meta, 'general.architecture')}.context_length", 4096)),
    }
    template = meta.get("tokenizer.chat_template") or chat_template
    if template:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False),
                                                  encoding="utf-8")


def build_tokenizer(meta: dict) -> Any:
    """A byte-level BPE tokenizer (the `gpt2` GGUF tokenizer model) with the family's pre-tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    kind = scalar(meta, "tokenizer.ggml.model", "")
    if kind == "llama" and scalar(meta, "general.architecture") == "gemma3":
        return build_spm_tokenizer(meta)
    if kind != "gpt2":
        raise ModelError(f"This GGUF uses a {kind or 'missing'} tokenizer; Engram converts byte-level BPE "
                         f"(gpt2-style) tokenizers only.")
    pre = scalar(meta, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise ModelError(f"This GGUF's tokenizer splits text the '{pre}' way, which Engram cannot reproduce yet.")
    tokens = list(meta["tokenizer.ggml.tokens"])
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    tokenizer.pre_tokenizer = _pre_tokenizer(pre, pre_tokenizers, Regex)
    tokenizer.decoder = decoders.ByteLevel()
    return add_special_tokens(tokenizer, meta)


def add_special_tokens(tokenizer: Any, meta: dict) -> Any:
    """Control tokens as special, user-defined ones as added (matched whole, printed as text), and the BOS token
    the file asks for."""
    from tokenizers import AddedToken, processors
    tokens = list(meta["tokenizer.ggml.tokens"])
    kinds: Any = meta.get("tokenizer.ggml.token_type")  # a numpy array or a list, or absent
    kinds = kinds.tolist() if hasattr(kinds, "tolist") else list(kinds or [])
    # 3 = control (special), 4 = user-defined (added, matched whole but printed as text)
    specials = [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, kinds) if k == 3]
    added = [AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, kinds) if k == 4]
    tokenizer.add_special_tokens(specials)
    tokenizer.add_tokens(added)
    if scalar(meta, "tokenizer.ggml.add_bos_token", False) and "tokenizer.ggml.bos_token_id" in meta:
        bos = tokens[int(scalar(meta, "tokenizer.ggml.bos_token_id"))]
        bos_id = int(scalar(meta, "tokenizer.ggml.bos_token_id"))
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    return tokenizer


def _pre_tokenizer(pre: str, pre_tokenizers: Any, Regex: Any) -> Any:
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre == "qwen2":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(_QWEN2_SPLIT), "isolated"), byte_level])
    if pre == "llama-bpe":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), "isolated"), byte_level])
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":  # SmolLM2's own tokenizer.json: single digits, then GPT-2's split
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2])
    return gpt2


# -- SentencePiece (Gemma 3) -----------------------------------------------------------------------
# SentencePiece BPE keeps no merge list: it merges the pair whose result scores highest. The merges are rebuilt from
# the scores the GGUF keeps (every split of a piece into two pieces, ranked by the whole piece's score), as Hugging
# Face's own SentencePiece converter does; spaces become "▁", bytes without a piece fall back to <0xNN> tokens.

NORMAL = 1  # GGUF token types: 1 normal, 3 control, 4 user-defined, 6 byte


def build_spm_tokenizer(meta: dict) -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    tokens = list(meta["tokenizer.ggml.tokens"])
    scores = list(meta.get("tokenizer.ggml.scores") or [])
    kinds = list(meta.get("tokenizer.ggml.token_type") or [])
    if len(scores) != len(tokens) or len(kinds) != len(tokens):
        raise ModelError("This GGUF's SentencePiece tokenizer lacks its scores or token types; it cannot be rebuilt.")
    unknown_id = int(scalar(meta, "tokenizer.ggml.unknown_token_id", 0))
    tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges(tokens, scores, kinds),
                                     unk_token=tokens[unknown_id], fuse_unk=True, byte_fallback=True))
    steps: list[normalizers.Normalizer] = [normalizers.Replace(" ", "▁")]
    if scalar(meta, "tokenizer.ggml.add_space_prefix", False):
        steps.insert(0, normalizers.Prepend("▁"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")  # as Gemma's own tokenizer.json
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return add_special_tokens(tokenizer, meta)


def merges(tokens: list[str], scores: list[float], kinds: list[int]) -> list[tuple[str, str]]:
    normal = {token: (score, index) for index, (token, score, kind) in enumerate(zip(tokens, scores, kinds))
              if kind == NORMAL}
    ranked = []
    for token, (score, index) in normal.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in normal and right in normal:
                ranked.append((-score, index, left, right))
    ranked.sort()
    return [(left, right) for _, _, left, right in ranked]
