"""A model's own sampling (core.model_sampling): its generation config's defaults, the user's values kept per model,
bad values refused in one line with nothing written."""
from __future__ import annotations

import json

import pytest

from core.config import GenerationSettings
from core.errors import InvalidInput
from core.model_sampling import (MODEL_SETTINGS_FILENAME, ModelSampling, model_defaults, model_sampling,
                                 save_model_sampling)

ENGRAM = GenerationSettings()


def _model(folder, generation=None, window=4096):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": window}))
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def test_defaults_come_from_the_models_generation_config_within_its_window(tmp_path):
    folder = _model(tmp_path / "m", {"temperature": 0.6, "top_p": 0.95, "max_new_tokens": 512}, window=4096)
    assert model_defaults(folder, ENGRAM) == ModelSampling(0.6, 0.95, 512, 4096)
    silent = _model(tmp_path / "s", None, window=32768)
    assert model_defaults(silent, ENGRAM) == ModelSampling(ENGRAM.temperature, ENGRAM.top_p, ENGRAM.max_tokens,
                                                           ENGRAM.context_tokens)
    greedy = _model(tmp_path / "g", {"do_sample": False, "temperature": 0.9})
    assert model_defaults(greedy, ENGRAM).temperature == 0.0


def test_the_users_values_are_kept_per_model_and_only_where_they_differ(tmp_path):
    folder = _model(tmp_path / "m", {"temperature": 0.6})
    data = tmp_path / "data"
    save_model_sampling(data, "org/m", folder, ENGRAM, {"temperature": 0.2, "max_tokens": 300})
    assert json.loads((data / MODEL_SETTINGS_FILENAME).read_text()) == {"org/m": {"temperature": 0.2,
                                                                                  "max_tokens": 300}}
    assert model_sampling(data, "org/m", folder, ENGRAM).temperature == 0.2
    assert model_sampling(data, "other/model", folder, ENGRAM).temperature == 0.6
    applied = model_sampling(data, "org/m", folder, ENGRAM).applied_to(ENGRAM)
    assert (applied.temperature, applied.max_tokens, applied.history_turns) == (0.2, 300, ENGRAM.history_turns)


@pytest.mark.parametrize("values, words", [({"temperature": 3.0}, "Temperature must be between 0 and 2."),
                                           ({"top_p": 0}, "Top-p must be between"),
                                           ({"context_tokens": 10**6}, "Context length must be between"),
                                           ({"max_tokens": 4000}, "Maximum reply length must be between"),
                                           ({"temperature": "hot"}, "Temperature must be a number.")])
def test_a_bad_value_is_refused_in_one_line_and_nothing_is_written(tmp_path, values, words):
    folder = _model(tmp_path / "m", {})
    with pytest.raises(InvalidInput) as refused:
        save_model_sampling(tmp_path / "data", "org/m", folder, ENGRAM, values)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "data" / MODEL_SETTINGS_FILENAME).exists()


def test_a_hand_edited_file_with_a_bad_value_falls_back_to_the_models_defaults(tmp_path):
    folder = _model(tmp_path / "m", {"temperature": 0.5})
    data = tmp_path / "data"
    data.mkdir()
    (data / MODEL_SETTINGS_FILENAME).write_text(json.dumps({"org/m": {"temperature": -4}}))
    assert model_sampling(data, "org/m", folder, ENGRAM).temperature == 0.5
