"""The recommendation weighs speed as well as fit (issue 38 #12): a cached probe of this machine, and each model's
estimated tokens per second beside it."""
from __future__ import annotations

import json

from models.registry import CURATED, default_model, find_model
from models.speed import CACHE_FILE, READABLE, MachineSpeed, machine_speed, probe_bandwidth, speed_words

GB = 1024 ** 3
TWO_CORES = MachineSpeed(1.9e9, "Linux x86_64 2 cpus, mlx 0.29 on Device(cpu, 0)")  # this CI machine, loaded
M2_GPU = MachineSpeed(90e9, "Darwin arm64 8 cpus, mlx 0.29 on Device(gpu, 0)")


def test_a_slow_cpu_is_recommended_the_fastest_model_that_fits_not_the_largest():
    assert default_model(16 * GB).name == "Qwen3-8B-4bit"  # fit alone: what the issue saw
    chosen = default_model(16 * GB, speed=TWO_CORES)
    assert chosen.name == "Qwen3-0.6B-4bit"
    assert all(TWO_CORES.model_pace(i) < READABLE for i in CURATED)  # none is readable there: the fastest, said so


def test_a_fast_gpu_keeps_the_best_model_that_fits_and_reads_at_a_readable_pace():
    chosen = default_model(16 * GB, speed=M2_GPU)
    assert chosen.name == "Qwen3-8B-4bit" and M2_GPU.model_pace(chosen) >= READABLE
    assert default_model(5726633984, speed=M2_GPU).name == "Qwen3-4B-4bit"  # an 8 GB Mac: fit still rules


def test_the_pace_reads_the_weights_a_runtime_reads():
    small = find_model("mlx-community/Qwen3-0.6B-4bit")
    assert round(M2_GPU.model_pace(small)) == round(0.6 * 90e9 / small.size_bytes)  # the quantized file
    assert TWO_CORES.model_pace(small) == 0.6 * 1.9e9 / (small.params_b * 4e9)  # float32 copies on a CPU
    assert speed_words(12.4) == "≈ 12 tok/s" and speed_words(0.47) == "≈ 0.5 tok/s" and speed_words(None) == ""


def test_the_probe_runs_once_per_machine_and_is_cached(tmp_path):
    probes = []

    def probe():
        probes.append(1)
        return 5e9
    first = machine_speed(tmp_path, probe=probe, key=lambda: "machine A")
    again = machine_speed(tmp_path, probe=probe, key=lambda: "machine A")
    assert first == again == MachineSpeed(5e9, "machine A") and len(probes) == 1
    other = machine_speed(tmp_path, probe=probe, key=lambda: "machine B")  # a new machine measures again
    assert other.machine == "machine B" and len(probes) == 2
    (tmp_path / CACHE_FILE).write_text("{not json", encoding="utf-8")
    assert machine_speed(tmp_path, probe=probe, key=lambda: "machine B").bytes_per_second == 5e9  # measured again
    assert json.loads((tmp_path / CACHE_FILE).read_text(encoding="utf-8"))["machine"] == "machine B"


def test_the_real_probe_measures_a_positive_bandwidth():
    assert probe_bandwidth(rounds=2, side=1024) > 0


def test_models_list_says_each_models_pace_here_and_recommends_by_it(cli, monkeypatch):
    monkeypatch.setattr("models.speed.machine_key", lambda: TWO_CORES.machine)
    monkeypatch.setattr("models.speed.probe_bandwidth", lambda: TWO_CORES.bytes_per_second)
    monkeypatch.setattr("app.cli.models.open_store", lambda services: _Store16())
    code, out, _ = cli("models", "list")
    assert code == 0 and "speed here" in out
    recommended = next(line for line in out.splitlines() if line.rstrip().endswith("Recommended"))
    assert "Qwen3-0.6B-4bit" in recommended and "≈ 0.5 tok/s" in recommended
    listing = json.loads(cli("models", "list", "--json")[1])
    paces = {row["name"]: row["tokens_per_second"] for row in listing["models"]}
    assert paces["Qwen3-8B-4bit"] < paces["Qwen3-0.6B-4bit"] < READABLE


class _Store16:
    """A models folder with nothing installed, on a 16 GB budget."""
    total_ram = 16 * GB

    def usable(self, _active):
        return []
