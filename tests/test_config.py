"""Settings and the data folder: ENGRAM_HOME, platform defaults, tolerant parsing, private files."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from core.config import (Settings, default_data_dir, ensure_private_dir, load_settings, resolve_data_dir,
                         save_settings)

HOME = Path("/home/ada")


def test_engram_home_overrides_every_platform():
    for platform in ("darwin", "linux", "win32"):
        assert default_data_dir({"ENGRAM_HOME": "/tmp/e"}, platform, HOME) == Path("/tmp/e")


def test_platform_default_folders():
    assert default_data_dir({}, "darwin", HOME) == HOME / "Library" / "Application Support" / "Engram"
    assert default_data_dir({}, "linux", HOME) == HOME / ".local" / "share" / "engram"
    assert default_data_dir({"XDG_DATA_HOME": "/x"}, "linux", HOME) == Path("/x/engram")
    assert default_data_dir({"APPDATA": "C:/Users/ada/AppData/Roaming"}, "win32", HOME) == \
        Path("C:/Users/ada/AppData/Roaming/Engram")


def test_engram_home_beats_the_settings_file_folder():
    settings = Settings(data_dir="/from/settings")
    assert resolve_data_dir(settings, {}) == Path("/from/settings")
    assert resolve_data_dir(settings, {"ENGRAM_HOME": "/from/env"}) == Path("/from/env")


def test_engram_home_fixture_is_used_by_services(engram_home):
    from app.services.wiring import Services
    assert Services.from_data_dir().data_dir == engram_home


def test_from_dict_ignores_unknown_keys_and_wrong_types():
    settings = Settings.from_dict({
        "embedder": "custom-model", "no_such_key": 1, "memory_dial": 42,
        "recall": {"k": 12, "candidates": "many", "preset": None, "extra": True},
        "forgetting": "not a mapping", "scheduler": {"require_ac_power": "yes", "idle_minutes": 5},
    })
    assert settings.embedder == "custom-model"
    assert settings.memory_dial == Settings().memory_dial
    assert settings.recall.k == 12 and settings.recall.candidates == Settings().recall.candidates
    assert settings.forgetting == Settings().forgetting
    assert settings.scheduler.require_ac_power is True and settings.scheduler.idle_minutes == 5.0


def test_from_dict_of_nothing_is_the_defaults():
    assert Settings.from_dict(None) == Settings() == Settings.from_dict({})
    assert Settings.from_dict(Settings(embedder="x").to_dict()).embedder == "x"


def test_settings_round_trip_privately(tmp_path):
    folder = tmp_path / "home"
    save_settings(Settings(chat_model="some/model"), folder)
    assert load_settings(folder).chat_model == "some/model"
    assert stat.S_IMODE((folder / "settings.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_damaged_settings_file_falls_back_to_defaults_and_is_kept(tmp_path):
    (tmp_path / "settings.json").write_text("{not json", encoding="utf-8")
    assert load_settings(tmp_path) == Settings()
    assert (tmp_path / "settings.json").read_text(encoding="utf-8") == "{not json"
    (tmp_path / "settings.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    assert load_settings(tmp_path) == Settings()


def test_ensure_private_dir_creates_a_private_folder_and_leaves_an_existing_one_as_it_was(tmp_path):
    made = ensure_private_dir(tmp_path / "new" / "engram")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a folder others share: Engram did not create it, so it must not tighten it
    ensure_private_dir(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
