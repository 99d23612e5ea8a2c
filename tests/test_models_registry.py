"""Registry, fit check and RAM reading (recorded command output, no machine dependence)."""
from __future__ import annotations

import subprocess

from models.registry import (CURATED, FITS, GB, TIGHT, TOO_BIG, default_model, find_model, fit,
                             parse_meminfo, parse_sysctl_memsize, total_ram_bytes)

MEMINFO = """MemTotal:       24529752 kB
MemFree:        21076420 kB
MemAvailable:   23046448 kB
Buffers:          171948 kB
"""
SYSCTL_N = "17179869184\n"  # `sysctl -n hw.memsize` on a 16 GB Mac
SYSCTL = "hw.memsize: 8589934592\n"  # `sysctl hw.memsize`


def test_parse_linux_meminfo():
    assert parse_meminfo(MEMINFO) == 24529752 * 1024
    assert parse_meminfo("garbage") == 0


def test_parse_macos_sysctl_both_forms():
    assert parse_sysctl_memsize(SYSCTL_N) == 16 * GB
    assert parse_sysctl_memsize(SYSCTL) == 8 * GB
    assert parse_sysctl_memsize("sysctl: unknown oid") == 0


def test_total_ram_reads_sysctl_on_macos():
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=SYSCTL_N, stderr="")

    assert total_ram_bytes("darwin", run=fake_run) == 16 * GB
    assert calls == [["sysctl", "-n", "hw.memsize"]]


def test_total_ram_reads_meminfo_on_linux(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    assert total_ram_bytes("linux", meminfo=path) == 24529752 * 1024
    assert total_ram_bytes("linux", meminfo=tmp_path / "missing") == 0


def test_fit_levels():
    assert fit(10 * GB, 16 * GB) == FITS
    assert fit(13 * GB, 16 * GB) == TIGHT
    assert fit(14 * GB, 16 * GB) == TOO_BIG


def test_default_model_grows_with_the_budget():
    assert default_model(8 * GB).repo_id == "mlx-community/Qwen3-4B-4bit"
    assert default_model(16 * GB).repo_id == "mlx-community/Qwen3-8B-4bit"
    assert default_model(4 * GB).repo_id == "mlx-community/Llama-3.2-1B-Instruct-4bit"
    assert default_model(1 * GB) == min(CURATED, key=lambda m: m.ram_bytes)


def test_curated_catalog_is_sane():
    repos = [m.repo_id for m in CURATED]
    assert len(repos) == len(set(repos))
    for info in CURATED:
        assert info.repo_id.startswith("mlx-community/") and "4bit" in info.repo_id
        assert 0.5 <= info.params_b <= 8.5
        assert info.ram_bytes > info.size_bytes > 0
        assert info.context_length >= 8192
    assert find_model("qwen3-0.6b-4bit").repo_id == "mlx-community/Qwen3-0.6B-4bit"
    assert find_model("nope") is None
