"""Streaming detokenizers: text as tokens arrive, the same pieces mlx-lm's stream_generate yields.

These follow mlx_lm.tokenizer_utils (0.32), whose module imports transformers: a byte-level BPE one (GPT-2 style
decoders), a SentencePiece one (the `▁` decoders), and a naive one that re-decodes the current line for any other
tokenizer. `detokenizer_factory` picks one from tokenizer.json's decoder exactly as mlx-lm does. Each works over
`ids_to_tokens` (the token strings by id) or `decode`, so any tokenizer object can feed them.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


class StreamingDetokenizer:
    """add_token() one id at a time; `last_segment` is the text readable since it was last read."""

    text: str
    tokens: list[int]
    offset: int

    def reset(self) -> None:
        raise NotImplementedError

    def add_token(self, token: int) -> None:
        raise NotImplementedError

    def finalize(self) -> None:
        raise NotImplementedError

    @property
    def last_segment(self) -> str:
        text = self.text
        segment = text[self.offset:]
        self.offset = len(text)
        return segment


class NaiveStreamingDetokenizer(StreamingDetokenizer):
    """Decodes the tokens of the current line again at each step; a line is final once it ends in a newline."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        probe = tokenizer.encode("a ,b", add_special_tokens=False)
        self._clean_spaces = " ," not in tokenizer.decode(probe)
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self.tokens = []
        self._text = ""
        self._current_tokens: list[int] = []
        self._current_text = ""

    def add_token(self, token: int) -> None:
        self._current_tokens.append(token)
        self.tokens.append(token)

    def finalize(self) -> None:
        self._text += self._tokenizer.decode(self._current_tokens)
        self._current_tokens = []
        self._current_text = ""

    @property
    def text(self) -> str:  # type: ignore[override]
        if self._current_tokens:
            self._current_text = self._tokenizer.decode(self._current_tokens)
            if self._current_text.endswith("\ufffd"):  # an incomplete character waits for its other bytes
                self._current_text = self._current_text.rstrip("\ufffd")
            elif self._clean_spaces and self._current_text and self._current_text[-1] == " ":
                self._current_text = self._current_text[:-1]
        if self._current_text and self._current_text[-1] == "\n":
            self._text += self._current_text
            self._current_tokens.clear()
            self._current_text = ""
        return self._text + self._current_text


class SPMStreamingDetokenizer(StreamingDetokenizer):
    """SentencePiece pieces: `▁` is a space, `<0xNN>` a byte; text is flushed once its bytes form characters."""

    _SEPARATOR = "\u2581".encode("utf-8")

    def __init__(self, tokenizer: Any, trim_space: bool = True) -> None:
        self.trim_space = trim_space
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.tokenmap = [bytes([int(t[3:5], 16)]) if t.startswith("<0x") else t.encode("utf-8") for t in tokens]
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self._unflushed = b""
        self.text = ""
        self.tokens = []

    def _try_flush(self, force: bool = False) -> None:
        text = self._unflushed.replace(self._SEPARATOR, b" ").decode("utf-8", "replace")
        if not force and text.endswith("\ufffd"):
            return
        if not self.text and self.trim_space and text and text[0] == " ":
            text = text[1:]
        self.text += text
        self._unflushed = b""

    def add_token(self, token: int) -> None:
        self.tokens.append(token)
        self._unflushed += self.tokenmap[token]
        self._try_flush()

    def finalize(self) -> None:
        self._try_flush(force=True)
        self._unflushed = b""


@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, reversed."""
    char_to_byte = {}
    limits = [0, ord("!"), ord("~") + 1, ord("¡"), ord("¬") + 1, ord("®"), ord("ÿ") + 1]
    n = 0
    for i, (start, stop) in enumerate(zip(limits, limits[1:])):
        for b in range(start, stop):
            if i % 2 == 0:
                char_to_byte[chr(2 ** 8 + n)] = b
                n += 1
            else:
                char_to_byte[chr(b)] = b
    return char_to_byte


class BPEStreamingDetokenizer(StreamingDetokenizer):
    """Byte-level BPE: token strings map back to bytes; a lone space waits for the next token."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenmap = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self._unflushed = ""
        self.text = ""
        self.tokens = []

    def _decode_bytes(self, seq: str) -> str:
        byte_decoder = _byte_decoder()
        out = bytearray()
        for c in seq:
            value = byte_decoder.get(c, False)
            if value:
                out.append(value)
            else:
                out.extend(bytes(c, "utf-8"))
        return out.decode("utf-8", "replace")

    def _maybe_trim_space(self, current: str) -> str:
        if current and current[0] == " " and not self.text:
            return current[1:]
        return current

    def add_token(self, token: int) -> None:
        self.tokens.append(token)
        piece = self.tokenmap[token] if token < len(self.tokenmap) else "!"  # mlx-lm's guard for padded vocabularies
        self._unflushed += piece
        text = self._decode_bytes(self._unflushed)
        lone_space = len(piece) == 1 and _byte_decoder().get(piece[0]) == 32
        if not text.endswith("\ufffd") and not lone_space:
            self.text += self._maybe_trim_space(text)
            self._unflushed = ""

    def finalize(self) -> None:
        byte_decoder = _byte_decoder()
        current = bytearray(byte_decoder[c] for c in self._unflushed).decode("utf-8", "replace")
        self.text += self._maybe_trim_space(current)
        self._unflushed = ""


_SPM_STEPS = [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}]
_SPM_STRIP = {"type": "Strip", "content": " ", "start": 1, "stop": 0}


def detokenizer_factory(decoder: Any) -> Callable[[Any], StreamingDetokenizer]:
    """The detokenizer class mlx-lm would choose for tokenizer.json's `decoder` entry."""
    if _matches(decoder, {"type": "Sequence", "decoders": [*_SPM_STEPS, _SPM_STRIP]}):
        return SPMStreamingDetokenizer
    if _matches(decoder, {"type": "Sequence", "decoders": _SPM_STEPS}):
        return functools.partial(SPMStreamingDetokenizer, trim_space=False)
    if isinstance(decoder, dict) and decoder.get("type") == "ByteLevel":
        return BPEStreamingDetokenizer
    return NaiveStreamingDetokenizer


def _matches(a: Any, b: Any) -> bool:
    if type(a) != type(b):  # noqa: E721 — mlx-lm compares types exactly
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and _matches(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_matches(x, y) for x, y in zip(a, b))
    return a == b
