"""GGUF → MLX conversion (models.gguf) through real MLX and the real gguf writer/reader.

A qwen2 GGUF is written here from the tiny model's float weights and tokenizer (Q8_0 matrices, as llama.cpp
would), converted back, and must give the same next tokens and the same token ids; the packaged SmolLM2 GGUF
(llama architecture) converts through both readers to the same logits.
"""
from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from core.errors import ModelError
from models.gguf import convert, mlx_name, read_gguf
from models.testing import build_tiny_model

gguf = pytest.importorskip("gguf")

_TO_GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}


def _gguf_name(name: str) -> str:
    if name.startswith("model.layers."):
        _, _, index, rest = name.split(".", 3)
        layer, kind = rest.rsplit(".", 1)
        return f"blk.{index}.{_TO_GGUF[layer]}.{kind}"
    return {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}[name]


def _llama_cpp_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """What llama.cpp's converter does to llama q/k projections (for its interleaved rotary embedding)."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(
        weights.shape)


def write_qwen2_gguf(model_dir: Path, path: Path, *, architecture: str = "qwen2",
                     rope_freqs: np.ndarray | None = None, q8: bool = True, changes: dict | None = None,
                     extra_tokens: int = 0) -> None:
    """The float tiny model as llama.cpp's converter would write it: metadata, byte-level BPE tokenizer, Q8_0
    matrices (or F16 ones). `changes` replaces metadata values by key (a hostile header); `extra_tokens` lists more
    tokens than the embedding has rows."""
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]
    specials = {t["content"] for t in tokenizer["added_tokens"] if t["special"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    tokens += [f"extra{n}" for n in range(extra_tokens)]
    writer = gguf.GGUFWriter(str(path), architecture)
    changes = changes or {}
    for key, value in (("block_count", config["num_hidden_layers"]),
                       ("context_length", config["max_position_embeddings"]),
                       ("embedding_length", config["hidden_size"]),
                       ("feed_forward_length", config["intermediate_size"]),
                       ("attention.head_count", config["num_attention_heads"]),
                       ("attention.head_count_kv", config["num_key_value_heads"])):
        writer.add_uint32(f"{architecture}.{key}", changes.get(key, value))
    writer.add_float32(f"{architecture}.rope.freq_base", changes.get("rope.freq_base", config["rope_theta"]))
    writer.add_float32(f"{architecture}.attention.layer_norm_rms_epsilon", config["rms_norm_eps"])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([3 if t in specials else 1 for t in tokens])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_pad_token_id(vocab["<|endoftext|>"])
    writer.add_chat_template(json.loads((model_dir / "tokenizer_config.json").read_text())["chat_template"])
    if rope_freqs is not None:
        writer.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))
    for name, value in mx.load(str(model_dir / "model.safetensors")).items():
        array = np.array(value.astype(mx.float32))
        if architecture == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config["num_attention_heads" if "q_proj" in name else "num_key_value_heads"]
            array = _llama_cpp_permute(array, heads)
        if array.ndim == 2 and not q8:
            writer.add_tensor(_gguf_name(name), array.astype(np.float16))
        elif array.ndim == 2:
            writer.add_tensor(_gguf_name(name), gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(_gguf_name(name), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-gguf")
    model_dir = build_tiny_model(folder / "float", quantize_bits=None)
    config_path = model_dir / "config.json"  # not mlx-lm's default, so a lost rope_theta would show
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "rope_theta": 250000.0}))
    write_qwen2_gguf(model_dir, folder / "tiny.gguf")
    return model_dir, folder / "tiny.gguf"


def _next_token_logits(folder: Path, ids: list[int]) -> mx.array:
    from mlx_lm import load
    model, _ = load(str(folder))
    return model(mx.array([ids]))[0].astype(mx.float32)


def test_a_qwen2_gguf_converts_to_the_same_model(tiny_gguf, tmp_path):
    from transformers import AutoTokenizer
    model_dir, path = tiny_gguf
    stages = []
    result = convert(path, tmp_path / "converted", q_bits=None, progress=lambda stage, f: stages.append((stage, f)))
    assert result.architecture == "qwen2" and result.bits is None and stages[-1] == ("done", 1.0)
    config = json.loads((result.folder / "config.json").read_text())
    assert config["rope_theta"] == 250000.0 and config["quantization"]["bits"] == 8
    assert config["tie_word_embeddings"] and not config["rope_traditional"]

    original = AutoTokenizer.from_pretrained(str(model_dir))
    converted = AutoTokenizer.from_pretrained(str(result.folder))
    text = "hello my name is Bob, I like coffee 123 and {\"n\": 42}"
    assert converted.encode(text) == original.encode(text)
    messages = [{"role": "user", "content": "hello"}]
    rendered = converted.apply_chat_template(messages, tokenize=False)
    assert rendered == original.apply_chat_template(messages, tokenize=False)
    assert converted.eos_token == "<|im_end|>"

    ids = original.encode(text)
    expected, got = _next_token_logits(model_dir, ids), _next_token_logits(result.folder, ids)
    assert mx.mean(mx.argmax(expected, -1) == mx.argmax(got, -1)).item() > 0.9  # Q8_0 rounding may flip a near tie
    correlation = np.corrcoef(np.array(expected).ravel(), np.array(got).ravel())[0, 1]
    assert correlation > 0.999


def _tiny_llama3(folder: Path) -> Path:
    """A float llama model with Llama 3.1+ rotary scaling, random weights and the tiny model's tokenizer."""
    from mlx.utils import tree_map
    from mlx_lm.models import llama
    from mlx_lm.utils import save_config, save_model
    from models.testing import build_tokenizer
    build_tokenizer(folder, 512)
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
              "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "vocab_size": 512,
              "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": True,
              "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192}}
    mx.random.seed(3)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    model.update(tree_map(lambda p: p * 4.0 if p.ndim == 2 else p, model.parameters()))
    save_model(folder, model)
    save_config(config, folder / "config.json")
    return folder


def _llama3_table(dims: int, base: float, factor: float) -> np.ndarray:
    """llama.cpp's rope_freqs for the llama3 rule (its converter's arithmetic)."""
    wavelengths = 2 * np.pi * base ** (np.arange(0, dims, 2) / dims)
    smooth = (8192 / wavelengths - 1) / 3
    return np.where(wavelengths < 8192 / 4, 1.0, np.where(wavelengths > 8192, factor,
                                                          1 / ((1 - smooth) / factor + smooth)))


def test_a_llama3_gguf_with_permuted_projections_and_a_rope_table_converts(tmp_path):
    """The llama layout: q/k permuted by llama.cpp (read back with mlx-lm's traditional rotary embedding) and the
    Llama 3.1+ frequency table turned back into mlx-lm's rope_scaling."""
    model_dir = _tiny_llama3(tmp_path / "float")
    write_qwen2_gguf(model_dir, tmp_path / "llama.gguf", architecture="llama",
                     rope_freqs=_llama3_table(16, 500000.0, 32.0), q8=False)
    result = convert(tmp_path / "llama.gguf", tmp_path / "converted", q_bits=None)
    config = json.loads((result.folder / "config.json").read_text())
    assert config["rope_scaling"]["factor"] == 32.0 and config["rope_traditional"]
    assert "quantization" not in config  # an F16 file stays unquantized
    ids = list(range(5, 400))  # long enough for the scaled low frequencies to matter (without: 0.97)
    expected, got = _next_token_logits(model_dir, ids), _next_token_logits(result.folder, ids)
    assert mx.mean(mx.argmax(expected, -1) == mx.argmax(got, -1)).item() > 0.99
    assert np.corrcoef(np.array(expected).ravel(), np.array(got).ravel())[0, 1] > 0.9999

    write_qwen2_gguf(model_dir, tmp_path / "odd.gguf", architecture="llama",
                     rope_freqs=_llama3_table(16, 500000.0, 32.0) * 1.5)
    with pytest.raises(ModelError, match="scales its rotary embeddings in a way Engram cannot reproduce"):
        convert(tmp_path / "odd.gguf", tmp_path / "odd")
    assert not (tmp_path / "odd").exists()


def test_requantizing_to_4_or_8_bits_loads(tiny_gguf, tmp_path):
    _, path = tiny_gguf
    for bits in (4, 8):
        result = convert(path, tmp_path / f"q{bits}", q_bits=bits)
        config = json.loads((result.folder / "config.json").read_text())
        assert config["quantization"] == {"group_size": 64, "bits": bits, "mode": "affine"} or \
            config["quantization"]["bits"] == bits
        assert _next_token_logits(result.folder, [1, 2, 3]).shape[0] == 3


def test_float32_keeps_the_files_weights_unquantized(tiny_gguf, tmp_path):
    _, path = tiny_gguf
    native = convert(path, tmp_path / "native", q_bits=None)
    full = convert(path, tmp_path / "f32", q_bits=32)
    assert full.bits == 32 and "quantization" not in json.loads((full.folder / "config.json").read_text())
    ids = list(range(5, 60))
    expected, got = _next_token_logits(native.folder, ids), _next_token_logits(full.folder, ids)
    assert mx.mean(mx.argmax(expected, -1) == mx.argmax(got, -1)).item() > 0.99  # the same weights, dequantized
    assert np.corrcoef(np.array(expected).ravel(), np.array(got).ravel())[0, 1] > 0.9999


def test_the_packaged_smollm2_reads_the_same_through_both_readers(tmp_path):
    """MLX's own reader keeps Q4_1 blocks as they are; the gguf package (the K-quant route) dequantizes them."""
    from models.gguf import _read_dequantized
    from models.testing_real import smollm2_gguf
    try:
        path = smollm2_gguf()
    except ModelError as exc:
        pytest.skip(str(exc))
    native, meta = read_gguf(path)
    seen = []
    plain = _read_dequantized(path, seen.append)
    assert seen == sorted(seen) and seen[0] == 0.0 and len(seen) == len(plain)  # once per tensor
    assert len(meta["tokenizer.ggml.tokens"]) == 49152
    name = "blk.3.ffn_down"
    restored = mx.dequantize(native[f"{name}.weight"], native[f"{name}.scales"], native[f"{name}.biases"],
                             group_size=32, bits=4)
    assert mx.allclose(restored, plain[f"{name}.weight"], atol=2e-3).item()
    assert mlx_name(f"{name}.weight") == "model.layers.3.mlp.down_proj.weight"


# -- refusals: one clear line, nothing written -----------------------------------------------------

def _fake_gguf(path: Path, architecture: str) -> Path:
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_an_unsupported_architecture_is_refused_clearly(tmp_path):
    path = _fake_gguf(tmp_path / "mamba.gguf", "mamba")
    with pytest.raises(ModelError, match="is a mamba model; Engram converts llama, qwen2, qwen3, gemma3 models"):
        convert(path, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mamba.gguf"]


@pytest.mark.parametrize("content, message", [(b"not a model at all", "is not a GGUF model file"),
                                              (b"GGUF\x03\x00\x00\x00garbage", "could not be read as GGUF")])
def test_a_file_that_is_not_gguf_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=message) as info:
        convert(path, tmp_path / "out")
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]


def test_bad_arguments_are_refused(tiny_gguf, tmp_path):
    _, path = tiny_gguf
    with pytest.raises(ModelError, match=r"q_bits must be 4, 8, 32 \(float32\) or None"):
        convert(path, tmp_path / "out", q_bits=3)
    (tmp_path / "taken").mkdir()
    with pytest.raises(ModelError, match="already exists"):
        convert(path, tmp_path / "taken")
    with pytest.raises(ModelError, match="is not a file"):
        convert(tmp_path / "missing.gguf", tmp_path / "out")
