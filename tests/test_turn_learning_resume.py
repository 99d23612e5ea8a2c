"""A turn's learning resumes (issue 38 #2): what its extraction found is kept with the turn, so a learning that
gave way to a reply (a veto, Regenerate, the next message) goes on from there instead of asking the model again;
and a claim whose process is gone is found at once, for the app to take over."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from core.assistant import BUSY
from core.store import turn_learning
from core.store.episodes import get_episode
from tests.fakes import ScriptedStructuredModel
from tests.test_turn_learning import CELLO, NEW
from tests.test_assistant import fact_reply, make


def _two_facts(_messages, _schema):
    return {"facts": [fact_reply("The user plays the cello.", "cello", "plays"),
                      fact_reply("The user lives in Boston.", "Boston", "lives in")]}


def test_a_turn_that_gave_way_after_extraction_resumes_without_asking_the_model_again(db, embedder, clock):
    model = ScriptedStructuredModel({"engram_facts": _two_facts, "reconcile_decision": [NEW],
                                     "usefulness_rating": [{"useful": []}]})
    from core.memory.index import index_memories
    from core.store.memories import add_memory
    chicago = add_memory(db, "The user lives in Chicago.", subject="user", relation="lives_in", object="Chicago")
    index_memories(db, embedder, [chicago])  # so Boston's reconciliation asks the model (and can give way)
    assistant = make(db, embedder, clock, model)
    # "near the river" is no plain pattern's: the extraction asks the model (core.memory.unread)
    episode = assistant.reply(None, "I play the cello and I live in Boston near the river",
                              learn=False).record.episode_id

    def reply_after_the_first_fact() -> bool:  # the user sends a message once the first fact is written
        return db.scalar("SELECT count(*) FROM memories") > 1
    first = assistant.learn(assistant.stored_turn(episode), busy=reply_after_the_first_fact)
    assert first.skipped == BUSY
    assert get_episode(db, episode).metadata["learning"] == "pending"
    second = assistant.learn(assistant.stored_turn(episode))
    assert not second.skipped
    assert model.titles().count("engram_facts") == 1  # resumed: the extraction was not asked again
    statements = {r[0] for r in db.execute("SELECT statement FROM memories")}
    assert {"The user plays the cello.", "The user lives in Boston."} <= statements
    assert "extracted" not in get_episode(db, episode).metadata  # done: the kept extraction goes


def test_a_claim_left_by_a_process_that_exited_is_found_at_once(db, embedder, clock):
    assistant = make(db, embedder, clock, ScriptedStructuredModel({}))
    episode = assistant.reply(None, CELLO, learn=False).record.episode_id
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_owner = f"{socket.gethostname()}:{int(gone.stdout)}:abcd1234"
    assert turn_learning.claim(db, episode, dead_owner) is not None  # `engram chat` claimed it, then closed
    live = turn_learning.claim(db, assistant.reply(None, "Hello", learn=False).record.episode_id,
                               turn_learning.new_owner())
    assert live is not None
    assert turn_learning.orphaned(db) == [episode]  # not the live one (this process's)
    assert os.getpid() != int(gone.stdout)
