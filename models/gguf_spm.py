"""A SentencePiece-style (`llama` GGUF tokenizer model) vocabulary as a Hugging Face tokenizer, for Gemma 3.

SentencePiece BPE keeps no merge list: it merges the pair whose result scores highest. The merges are rebuilt from
the scores the GGUF keeps (every split of a piece into two pieces, ranked by the whole piece's score), as Hugging
Face's own SentencePiece converter does; spaces become "▁", bytes without a piece fall back to <0xNN> tokens.
"""
from __future__ import annotations

from typing import Any

from core.errors import ModelError
from models.gguf_tokenizer import add_special_tokens, scalar

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
    steps = [normalizers.Replace(" ", "▁")]
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
