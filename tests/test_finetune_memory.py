"""A fine-tune loads a second copy of the model in its worker while the app keeps its own for chat (issue 36.9).
Recorded mx.device_info() of an 8 GB and a 16 GB Mac decide which curated models may fine-tune beside the chat
model, which only once it is unloaded, and which not at all; the app unloads the chat model when it must."""
from __future__ import annotations

import pytest

from app.services.scheduling import make_room_for_training
from core.errors import ModelError
from models.budget import GPU_WORKING_SET, MemoryBudget, memory_budget
from models.registry import (BESIDE_CHAT, CURATED, FITS, TIGHT_SHARE, TOO_BIG, WITHOUT_CHAT, find_model, finetune_fit,
                             fit, need_for_folder, training_need, training_need_for_folder)

# mx.device_info() as recorded on Apple Silicon Macs (as in tests/test_registry_fit.py).
M1_16GB = {"architecture": "applegpu_g13g", "device_name": "Apple M1", "max_buffer_length": 8589934592,
           "max_recommended_working_set_size": 11453251584, "memory_size": 17179869184, "resource_limit": 499000}
M2_8GB = {"architecture": "applegpu_g14g", "device_name": "Apple M2", "max_buffer_length": 4294967296,
          "max_recommended_working_set_size": 5726633984, "memory_size": 8589934592, "resource_limit": 499000}

EXPECTED = {  # model: (8 GB Mac, 16 GB Mac), with the chat model loaded when the fine-tune starts
    "Qwen3-0.6B-4bit": (BESIDE_CHAT, BESIDE_CHAT),
    "gemma-3-1b-it-4bit": (BESIDE_CHAT, BESIDE_CHAT),
    "Llama-3.2-1B-Instruct-4bit": (WITHOUT_CHAT, BESIDE_CHAT),
    "Llama-3.2-3B-Instruct-4bit": (TOO_BIG, BESIDE_CHAT),
    "Qwen3-4B-4bit": (TOO_BIG, WITHOUT_CHAT),
    "gemma-3-4b-it-4bit-DWQ": (TOO_BIG, WITHOUT_CHAT),
    "Qwen3-8B-4bit": (TOO_BIG, TOO_BIG),
}


def verdict(info, device_info) -> str:
    budget = memory_budget("darwin", device_info=lambda: device_info).bytes
    return finetune_fit(info.ram_bytes, training_need(info.size_bytes, info.hidden_size, info.layers), budget)


def test_recorded_8_and_16_gb_macs_decide_which_models_may_fine_tune():
    assert {info.name for info in CURATED} == set(EXPECTED)
    for info in CURATED:
        assert (verdict(info, M2_8GB), verdict(info, M1_16GB)) == EXPECTED[info.name], info.name


def test_the_chat_verdict_alone_missed_the_second_copy():
    """What the fit said before: the 16 GB Mac's default chat model fits, and nothing counted the fine-tune's copy."""
    qwen8b = find_model("Qwen3-8B-4bit")
    budget = memory_budget("darwin", device_info=lambda: M1_16GB).bytes
    assert fit(qwen8b.ram_bytes, budget) == FITS
    both = qwen8b.ram_bytes + training_need(qwen8b.size_bytes, qwen8b.hidden_size, qwen8b.layers)
    assert both > budget


def test_unknown_memory_neither_promises_nor_refuses():
    assert finetune_fit(10**9, 10**9, 0) == BESIDE_CHAT


class Chat:
    """Services as make_room_for_training sees them: the chosen model's folder and whether it is loaded."""

    def __init__(self, folder):
        self.folder, self.loaded, self.unloads = folder, True, 0

    def chat_model_folder(self):
        return self.folder

    def chat_loaded(self):
        return self.loaded

    def unload_chat(self):
        self.unloads += 1
        self.loaded = False


def budget_for(share_of_limit: float) -> MemoryBudget:
    return MemoryBudget(int(share_of_limit / TIGHT_SHARE), GPU_WORKING_SET)


def test_the_app_unloads_the_chat_model_only_when_both_would_not_fit(tiny_model_dir):
    train, chat = training_need_for_folder(tiny_model_dir), need_for_folder(tiny_model_dir)
    services = Chat(tiny_model_dir)
    assert make_room_for_training(services, budget=budget_for(train + chat + 1)) == BESIDE_CHAT
    assert services.unloads == 0
    assert make_room_for_training(services, budget=budget_for(train + chat // 2)) == WITHOUT_CHAT
    assert services.unloads == 1
    assert make_room_for_training(services, budget=budget_for(train + chat // 2)) == BESIDE_CHAT  # now unloaded
    with pytest.raises(ModelError, match=r"^Fine-tuning tiny-4bit needs about .* GB, more than what the GPU may use"):
        make_room_for_training(Chat(tiny_model_dir), budget=budget_for(train // 2))


def test_a_real_services_object_loads_the_chat_model_again_after_making_room(tmp_path, tiny_model_dir):
    from app.services.wiring import Services
    import dataclasses
    services = Services.from_data_dir(tmp_path / "home")
    services.settings = dataclasses.replace(services.settings, chat_model=str(tiny_model_dir))
    try:
        services.chat_engine()
        assert services.chat_loaded()
        tight = budget_for(training_need_for_folder(tiny_model_dir) + 1)
        assert make_room_for_training(services, budget=tight) == WITHOUT_CHAT
        assert not services.chat_loaded()
        assert services.chat_engine().loaded  # the next reply loads it again
    finally:
        services.close()
