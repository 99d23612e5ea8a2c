"""Issue 40, section 4, through the real engine (SmolLM2-135M): with nothing recalled, the note that says so reaches
the model inside the system turn of the rendered chat template, as Engram's words, never as the user's; the user's
question stays the user's. Whether a model obeys is measured by bench/answers.py, not asserted of a 135M model."""
from __future__ import annotations

import pytest

from core.assistant import Assistant
from core.config import GenerationSettings, Settings
from core.prompts.answer import NOTHING_RECALLED
from core.store.sessions import create_session
from models.chat import ChatEngine

QUESTION = "What did I name my first dog?"


@pytest.fixture(scope="module")
def real_engine(real_model_dir):
    engine = ChatEngine.load(real_model_dir, context_tokens=2048)
    yield engine
    engine.unload()


def test_the_note_reaches_the_model_in_the_system_turn(db, embedder, clock, real_engine):
    settings = Settings(generation=GenerationSettings(temperature=0.0, max_tokens=24, context_tokens=2048))
    assistant = Assistant(db, embedder, real_engine, None, settings, clock)
    prepared = assistant.prepare(create_session(db, "chat"), QUESTION)
    text = real_engine.tokenizer.decode(real_engine.render(prepared.messages))
    system, _, rest = text.partition("<|im_start|>user\n")
    assert system.startswith("<|im_start|>system\n") and NOTHING_RECALLED in system
    assert rest.startswith(QUESTION + "<|im_end|>") and NOTHING_RECALLED not in rest
    reply = "".join(chunk.text for chunk in assistant.stream(prepared))
    assert reply.strip()  # it answers; what it says is the bench's to score
