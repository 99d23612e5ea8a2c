"""The fine-tuned adapter the store marks active is the one chat runs with: activated, switched, rolled back."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.services.wiring import Services
from core.finetune import adapters as versions
from core.protocols import ChatMessage, SamplingParams
from models.testing import write_random_adapter

MESSAGES = [ChatMessage("user", "what do I like to drink?")]


@pytest.fixture
def services(tmp_path, tiny_model_dir):
    services = Services.from_data_dir(tmp_path / "home")
    services.settings = services.settings.replace(chat_model=str(tiny_model_dir))
    yield services
    services.close()


def _adapter(services, folder: Path, *, base: Path) -> int:
    return versions.record_adapter(services.db, name=folder.name, base_model=str(base), path=str(folder),
                                   status="accepted", metrics={}, config={}, sources={"memory": []}).id


def _reply(engine) -> list[int]:
    list(engine.stream(MESSAGES, SamplingParams.greedy(12)))
    return list(engine.last_reply_tokens)


def test_chat_follows_the_active_adapter(services, tiny_model_dir, tmp_path):
    first = write_random_adapter(tiny_model_dir, tmp_path / "first", seed=1)
    second = write_random_adapter(tiny_model_dir, tmp_path / "second", seed=2)
    a, b = _adapter(services, first, base=tiny_model_dir), _adapter(services, second, base=tiny_model_dir)
    engine = services.chat_engine(adapter_db=services.db)
    assert engine.adapter is None  # nothing active yet: the base model
    base_reply = _reply(engine)

    versions.activate(services.db, a)  # as the gate does after a better fine-tune
    assert services.chat_engine(adapter_db=services.db).adapter == first
    versions.activate(services.db, b)  # the user picks another version
    assert services.chat_engine(adapter_db=services.db).adapter == second
    versions.rollback_to_base(services.db)
    assert services.chat_engine(adapter_db=services.db).adapter is None
    assert _reply(engine) == base_reply  # the base model exactly, as before


def test_an_adapter_that_cannot_apply_is_skipped(services, tiny_model_dir, tmp_path):
    other_base = _adapter(services, write_random_adapter(tiny_model_dir, tmp_path / "x", seed=3),
                          base=tmp_path / "another-model")
    versions.activate(services.db, other_base)
    assert services.chat_engine(adapter_db=services.db).adapter is None  # trained on another model

    gone = write_random_adapter(tiny_model_dir, tmp_path / "gone", seed=4)
    versions.activate(services.db, _adapter(services, gone, base=tiny_model_dir))
    shutil.rmtree(gone)
    assert services.chat_engine(adapter_db=services.db).adapter is None  # its folder was removed: chat goes on

    broken = tmp_path / "broken"
    broken.mkdir()
    versions.activate(services.db, _adapter(services, broken, base=tiny_model_dir))
    assert services.chat_engine(adapter_db=services.db).adapter is None  # not an adapter folder: base model
