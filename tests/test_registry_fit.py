"""Fit against what the GPU may use (recorded mx.device_info() dicts), or the memory free on a machine without one."""
from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from models.budget import (AVAILABLE_RAM, GPU_WORKING_SET, TOTAL_RAM, MemoryBudget, budget_words, device_info,
                           memory_budget, parse_device_info, parse_meminfo_available)
from models.registry import (CURATED, FITS, GB, OVERHEAD_BYTES, TIGHT, TOO_BIG, TYPICAL_CONTEXT_TOKENS,
                             default_model, find_model, fit, kv_bytes_per_token, need_for_folder, need_estimate)

# mx.device_info() as recorded on Apple Silicon Macs (mlx 0.2x-0.3x; older mlx names it mx.metal.device_info()).
M1_16GB = {"architecture": "applegpu_g13g", "device_name": "Apple M1", "max_buffer_length": 8589934592,
           "max_recommended_working_set_size": 11453251584, "memory_size": 17179869184, "resource_limit": 499000}
M2_8GB = {"architecture": "applegpu_g14g", "device_name": "Apple M2", "max_buffer_length": 4294967296,
          "max_recommended_working_set_size": 5726633984, "memory_size": 8589934592, "resource_limit": 499000}
LINUX_CPU = {"architecture": "x86_64", "device_name": "Intel(R) Xeon(R) Processor"}  # this mlx on Linux
MEMINFO = "MemTotal:       24529752 kB\nMemFree:        21076420 kB\nMemAvailable:   23046448 kB\n"


def test_the_gpu_working_set_is_read_from_device_info():
    assert parse_device_info(M1_16GB) == 11453251584
    assert parse_device_info(M2_8GB) == 5726633984
    assert parse_device_info(LINUX_CPU) == 0  # no GPU figure: the caller falls back to memory
    assert parse_device_info({"max_recommended_working_set_size": "lots"}) == 0
    assert parse_device_info({"max_recommended_working_set_size": -1}) == 0


def test_device_info_uses_the_newer_api_first_and_the_older_one_as_a_fallback():
    newer = SimpleNamespace(device_info=lambda: M1_16GB, metal=SimpleNamespace(device_info=lambda: {}))
    older = SimpleNamespace(metal=SimpleNamespace(device_info=lambda: M2_8GB))

    def broken():
        raise RuntimeError("no Metal device")
    assert device_info(newer) == M1_16GB
    assert device_info(older) == M2_8GB
    assert device_info(SimpleNamespace(device_info=broken)) == {}
    assert device_info(SimpleNamespace()) == {}


def test_a_mac_budget_is_what_the_gpu_may_use():
    budget = memory_budget("darwin", device_info=lambda: M1_16GB)
    assert budget == MemoryBudget(11453251584, GPU_WORKING_SET)
    assert budget_words(budget, "this Mac") == "what the GPU may use, 10.7 GB of this Mac's memory"


def test_a_mac_without_the_figure_falls_back_to_its_memory(tmp_path):
    def sysctl(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 0, stdout="17179869184\n", stderr="")
    budget = memory_budget("darwin", device_info=lambda: {}, run=sysctl)
    assert budget == MemoryBudget(16 * GB, TOTAL_RAM)
    assert budget_words(budget, "this Mac") == "16.0 GB of this Mac's memory"


def test_linux_uses_the_memory_available_now_and_says_so(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    assert parse_meminfo_available(MEMINFO) == 23046448 * 1024
    assert parse_meminfo_available("MemTotal: 1 kB\n") == 0
    budget = memory_budget("linux", meminfo=meminfo)
    assert budget == MemoryBudget(23046448 * 1024, AVAILABLE_RAM)
    assert budget_words(budget, "this computer") == "22.0 GB free of this computer's memory"
    assert memory_budget("linux", meminfo=tmp_path / "missing").bytes == 0


@pytest.mark.parametrize("share, verdict", [(0.5, FITS), (0.7499, FITS), (0.75, TIGHT), (0.85, TIGHT),
                                            (0.8501, TOO_BIG), (1.2, TOO_BIG)])
def test_verdicts_are_shares_of_the_budget(share, verdict):
    budget = 10 * GB
    assert fit(int(budget * share), budget) == verdict


def test_an_unknown_budget_neither_promises_nor_refuses():
    assert fit(GB, 0) == TIGHT


def test_need_is_weights_plus_the_kv_cache_of_a_typical_context_plus_overhead():
    assert need_estimate(GB, 1000) == GB + 1000 * TYPICAL_CONTEXT_TOKENS + OVERHEAD_BYTES
    qwen3 = {"model_type": "qwen3", "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
             "head_dim": 128, "hidden_size": 4096}
    assert kv_bytes_per_token(qwen3) == 2 * 36 * 8 * 128 * 2  # keys and values, fp16
    llama = {"num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 2048}
    assert kv_bytes_per_token(llama) == 2 * 16 * 8 * 64 * 2  # head_dim from hidden_size / heads
    gemma = {"model_type": "gemma3", "text_config": {"num_hidden_layers": 34, "num_attention_heads": 8,
                                                    "num_key_value_heads": 4, "head_dim": 256}}
    assert kv_bytes_per_token(gemma) == 2 * 34 * 4 * 256 * 2
    assert kv_bytes_per_token({"model_type": "mystery"}) is None


def test_a_folder_need_reads_its_config(tiny_model_dir):
    weights = sum(p.stat().st_size for p in tiny_model_dir.glob("*.safetensors"))
    need = need_for_folder(tiny_model_dir)
    assert need > weights + OVERHEAD_BYTES  # its KV cache counted from its own config


def test_curated_needs_include_their_kv_cache():
    qwen8 = find_model("Qwen3-8B-4bit")
    assert qwen8.ram_bytes == need_estimate(qwen8.size_bytes, 2 * 36 * 8 * 128 * 2)
    assert all(info.ram_bytes > info.size_bytes + OVERHEAD_BYTES for info in CURATED)


def test_recorded_macs_get_the_verdicts_a_user_would_expect():
    m1 = parse_device_info(M1_16GB)
    m2 = parse_device_info(M2_8GB)
    qwen8, qwen4 = find_model("Qwen3-8B-4bit"), find_model("Qwen3-4B-4bit")
    assert fit(qwen8.ram_bytes, m1) == FITS and default_model(m1).repo_id == qwen8.repo_id
    assert fit(qwen8.ram_bytes, m2) == TOO_BIG  # 16 GB of RAM would have said otherwise
    assert fit(qwen4.ram_bytes, m2) == FITS and default_model(m2).repo_id == qwen4.repo_id
