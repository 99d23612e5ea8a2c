"""The chat engine uses a model's own sampling (core.model_sampling) through Services, with the real tiny model:
the longest reply the user set bounds the reply, the context length bounds the prompt window, and temperature 0 is
greedy (the same reply twice)."""
from __future__ import annotations

import json
import shutil

from app.services.wiring import Services
from core.config import update_settings
from core.model_sampling import save_model_sampling


def test_a_models_settings_reach_the_engine(tmp_path, tiny_model_dir, embedder):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "generation_config.json").write_text(json.dumps({"temperature": 0.9, "max_new_tokens": 300}))
    home = tmp_path / "home"
    home.mkdir()
    update_settings(home, {"chat_model": str(folder)})
    services = Services.from_data_dir(home)
    services._embedder = embedder
    try:
        assert services.generation().temperature == 0.9 and services.generation().max_tokens == 300  # its defaults
        save_model_sampling(home, str(folder), folder, services.settings.generation,
                            {"temperature": 0.0, "max_tokens": 4, "context_tokens": 1024})
        assistant = services.assistant()
        first = assistant.reply(None, "Tell me about the sea", incognito=True, learn=False)
        second = assistant.reply(None, "Tell me about the sea", incognito=True, learn=False)
        engine = services.chat_engine()
        assert engine.context_window == 1024
        assert 0 < len(engine.last_reply_tokens) <= 4
        assert first.text == second.text  # greedy
    finally:
        services.close()
