"""Learning a stored chat turn, whoever does it (the chat's queue, the idle job, `engram reflect`, another process):
a turn whose learning keeps failing is given up after a few tries and stays an episode; a busy store is not held
against the turn; two learners racing for one turn learn it once; the waiting turns are found through an index
(migration 7), not by reading every episode's JSON."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import apsw
import pytest

from core.assistant import TAKEN, Assistant, pending_learning
from core.config import Settings
from core.memory.index import index_episodes
from core.memory.recall import recall
from core.store import turn_learning
from core.store.db import open_db
from core.store.episodes import add_episode, get_episode
from core.store.memories import list_memories
from core.store.migrations import LATEST_VERSION, MIGRATIONS
from tests.fakes import HashEmbedder, ScriptedStructuredModel
from tests.test_assistant import fact_reply, make

ROOT = Path(__file__).resolve().parents[1]
CELLO = "I play the cello every evening"
NEW = {"decision": "new", "target": 0, "reason": "new"}


def _out_of_memory(messages, schema):
    raise RuntimeError("[METAL] Command buffer execution failed: Insufficient Memory")


def _cello(messages, schema):
    return {"facts": [fact_reply("The user plays the cello.", "cello", "plays")]}


def _waiting_turn(assistant) -> int:
    return assistant.reply(None, CELLO, learn=False).record.episode_id


def test_a_turn_whose_learning_always_fails_is_given_up_after_three_tries_and_the_turn_stays(db, embedder, clock):
    structured = ScriptedStructuredModel({"engram_facts": _out_of_memory})
    assistant = make(db, embedder, clock, structured)
    episode = _waiting_turn(assistant)
    for attempt in range(1, turn_learning.MAX_ATTEMPTS + 1):
        assert pending_learning(db) == [episode], attempt
        with pytest.raises(RuntimeError, match="Insufficient Memory"):
            assistant.learn(assistant.stored_turn(episode))
        assert pending_learning(db) == []  # not again at once: the idle pass waits before the next try
        clock.now += turn_learning.RETRY_AFTER * attempt
    assert pending_learning(db) == []  # given up: no idle pass tries it again
    assert structured.titles().count("engram_facts") == turn_learning.MAX_ATTEMPTS
    assert get_episode(db, episode).metadata["learning"] == "failed"
    (failed,) = turn_learning.given_up(db)
    assert (failed.episode_id, failed.attempts) == (episode, 3) and "Insufficient Memory" in failed.last_error
    again = assistant.learn(assistant.stored_turn(episode))  # asked directly: still not tried
    assert again.skipped == TAKEN and structured.titles().count("engram_facts") == 3
    hits = recall(db, embedder, "cello evening", k=3, kinds=("episode",)).hits  # the turn itself is kept
    assert [h.id for h in hits] == [episode]


def test_a_busy_store_is_not_held_against_the_turn_and_a_later_try_learns_it(db, embedder, clock):
    holder = apsw.Connection(str(db.path))  # another Engram process, writing for longer than the busy timeout
    tries = {"n": 0}

    def extract(messages, schema):
        tries["n"] += 1
        if tries["n"] <= turn_learning.MAX_ATTEMPTS + 1:
            holder.execute("BEGIN IMMEDIATE")  # it takes the write lock while the model extracts
        return _cello(messages, schema)
    db.conn.set_busy_timeout(20)
    db.busy_pauses, db.sleep = (0.0,), lambda _: holder.execute("ROLLBACK") if holder.in_transaction else None
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": extract,
                                                                     "reconcile_decision": [NEW]}))
    episode = _waiting_turn(assistant)
    for _ in range(turn_learning.MAX_ATTEMPTS + 1):
        with pytest.raises(apsw.BusyError):
            assistant.learn(assistant.stored_turn(episode))
        assert pending_learning(db) == [episode]  # waiting as before, and no try was counted
    report = assistant.learn(assistant.stored_turn(episode))
    assert [o.decision for o in report.outcomes] == ["new"] and pending_learning(db) == []
    assert get_episode(db, episode).metadata["learning"] == "done" and turn_learning.given_up(db) == []
    holder.close()


def test_two_learners_racing_for_one_turn_learn_it_once(tmp_path, embedder, clock):
    """Two connections, two threads (the chat's queue and the idle job): each one's extraction waits until the
    other learner has returned, so without an atomic claim both would be extracting at once."""
    path = tmp_path / "engram.db"
    databases = [open_db(path, clock=clock) for _ in range(2)]
    returned = [threading.Event(), threading.Event()]
    models = []
    for n in range(2):
        def extract(messages, schema, other=returned[1 - n]):
            other.wait(timeout=3)
            return _cello(messages, schema)
        models.append(ScriptedStructuredModel({"engram_facts": extract, "reconcile_decision": [NEW]}))
    learners = [make(database, embedder, clock, model) for database, model in zip(databases, models)]
    episode = _waiting_turn(learners[0])
    reports: list = [None, None]

    def learn(n: int) -> None:
        try:
            reports[n] = learners[n].learn(learners[n].stored_turn(episode))
        finally:
            returned[n].set()
    threads = [threading.Thread(target=learn, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(r.skipped for r in reports) == ["", TAKEN]
    assert sum(m.titles().count("engram_facts") for m in models) == 1
    assert [m.statement for m in list_memories(databases[0])] == ["The user plays the cello."]
    assert pending_learning(databases[1]) == [] and get_episode(databases[1], episode).metadata["learning"] == "done"
    for database in databases:
        database.close()


def test_a_live_learners_claim_is_left_alone_until_its_lease_runs_out(db, embedder, clock):
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": _cello,
                                                                     "reconcile_decision": [NEW]}))
    episode = _waiting_turn(assistant)
    held = turn_learning.claim(db, episode, turn_learning.new_owner())  # a learner in this live process
    assert held is not None and held.attempt == 1 and pending_learning(db) == []
    assert assistant.learn(assistant.stored_turn(episode)).skipped == TAKEN
    clock.now += turn_learning.CLAIM_LEASE  # its release was lost (a store busy for too long): taken over now
    assert pending_learning(db) == [episode]
    assert assistant.learn(assistant.stored_turn(episode)).facts and pending_learning(db) == []


def test_waiting_turns_are_found_through_an_index_not_by_reading_every_episode(db):
    for n in range(20):
        add_episode(db, f"turn {n}", metadata={"learning": "done" if n % 2 else "pending"})
    statements: list[tuple[str, tuple]] = []

    def trace(cursor, sql, bindings):
        statements.append((sql, tuple(bindings or ())))
        return True
    db.conn.exec_trace = trace
    pending_learning(db, limit=5)
    db.conn.exec_trace = None
    plans = [" ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + sql, bindings))
             for sql, bindings in statements if "episodes" in sql]
    assert plans and all("episodes_learning_pending" in p for p in plans), plans
    whole_table = re.compile(r"SCAN (e|episodes)\b(?! USING INDEX episodes_learning_pending)")
    assert not any(whole_table.search(p) for p in plans), plans  # only the waiting turns' own index is read


def test_migration_7_indexes_the_turns_an_older_store_left_waiting(tmp_path, clock):
    path = tmp_path / "engram.db"
    older = open_db(path, clock=clock, migrations=MIGRATIONS[:6])
    waiting = add_episode(older, "I play the oboe", metadata={"learning": "pending"})
    add_episode(older, "hello", metadata={"learning": "done"})
    older.close()
    migrated = open_db(path, clock=clock)
    assert migrated.schema_version() == LATEST_VERSION and pending_learning(migrated) == [waiting]
    assert migrated.scalar("SELECT count(*) FROM sqlite_master WHERE name IN ('episodes_learning_pending', "
                           "'turn_learning')") == 2
    migrated.close()


def test_a_migration_7_that_fails_half_way_leaves_nothing_behind_and_runs_again(tmp_path, clock):
    path = tmp_path / "engram.db"
    open_db(path, clock=clock, migrations=MIGRATIONS[:6]).close()
    seventh = MIGRATIONS[6]

    def crash(conn):
        seventh.apply(conn)
        raise RuntimeError("power cut")
    with pytest.raises(RuntimeError, match="power cut"):
        open_db(path, clock=clock, migrations=(*MIGRATIONS[:6], type(seventh)(7, seventh.name, crash)))
    half = open_db(path, clock=clock, migrations=MIGRATIONS[:6])
    assert half.schema_version() == 6
    assert half.scalar("SELECT count(*) FROM sqlite_master WHERE name IN ('episodes_learning_pending', "
                       "'turn_learning')") == 0
    half.close()
    again = open_db(path, clock=clock)
    assert again.schema_version() == LATEST_VERSION and pending_learning(again) == []
    again.close()


LEARNER = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from core.assistant import Assistant
    from core.config import Settings
    from core.store.db import open_db
    from tests.fakes import HashEmbedder, ScriptedStructuredModel
    from tests.test_assistant import fact_reply

    def extract(messages, schema):
        print("extracting", flush=True)
        sys.stdin.readline()  # the parent says when to go on (or kills this process here)
        return {{"facts": [fact_reply("The user plays the cello.", "cello", "plays")]}}
    model = ScriptedStructuredModel({{"engram_facts": extract,
                                      "reconcile_decision": [{{"decision": "new", "target": 0, "reason": "new"}}]}})
    db = open_db({path!r})
    assistant = Assistant(db, HashEmbedder(), None, model, Settings())
    report = assistant.learn(assistant.stored_turn({episode}))
    print(json.dumps({{"skipped": report.skipped, "facts": len(report.facts)}}), flush=True)
""")


def _learner_process(path, episode: int) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", LEARNER.format(root=str(ROOT), path=str(path), episode=episode)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "extracting", child.stderr.read()
    return child


def _stored_turn_in_a_file(tmp_path):
    db = open_db(tmp_path / "engram.db")
    assistant = Assistant(db, HashEmbedder(), None, ScriptedStructuredModel({"engram_facts": _cello,
                                                                             "reconcile_decision": [NEW]}),
                          Settings())
    episode = add_episode(db, CELLO, "Lovely.", metadata={"learning": "pending"})
    index_episodes(db, HashEmbedder(), [episode])  # the embedder is bound before two processes use it
    return db, assistant, episode


def test_a_turn_another_process_is_learning_is_left_to_it(tmp_path):
    db, assistant, episode = _stored_turn_in_a_file(tmp_path)
    child = _learner_process(db.path, episode)  # the other process is extracting the turn's facts now
    assert pending_learning(db) == []
    assert assistant.learn(assistant.stored_turn(episode)).skipped == TAKEN
    out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"skipped": "", "facts": 1}
    assert assistant.structured.titles() == [] and len(list_memories(db)) == 1
    db.close()


def test_a_turn_whose_learner_was_killed_is_learned_by_the_next_one(tmp_path):
    db, assistant, episode = _stored_turn_in_a_file(tmp_path)
    _killed_while_learning(db.path, episode)
    assert pending_learning(db) == [episode]
    report = assistant.learn(assistant.stored_turn(episode))
    assert report.facts and pending_learning(db) == [] and get_episode(db, episode).metadata["learning"] == "done"
    db.close()


def test_a_turn_that_kills_its_learner_every_time_is_given_up_after_three(tmp_path):
    db, assistant, episode = _stored_turn_in_a_file(tmp_path)
    for _ in range(turn_learning.MAX_ATTEMPTS):
        _killed_while_learning(db.path, episode)
    assert assistant.learn(assistant.stored_turn(episode)).skipped == TAKEN and assistant.structured.titles() == []
    assert pending_learning(db) == [] and get_episode(db, episode).metadata["learning"] == "failed"
    (failed,) = turn_learning.given_up(db)
    assert failed.last_error == "learning was interrupted 3 times"
    db.close()


def _killed_while_learning(path, episode: int) -> None:
    child = _learner_process(path, episode)
    child.kill()  # the process dies mid-learning (the OOM killer, a force quit)
    child.communicate(timeout=60)


def test_bring_back_after_forget_everything_keeps_a_given_up_turns_error(tmp_path, embedder, clock):
    from core.memory.manage import MemoryManager
    from core.store import wipe
    db = open_db(tmp_path / "engram.db", clock=clock)
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": _out_of_memory}))
    episode = _waiting_turn(assistant)
    for attempt in range(1, turn_learning.MAX_ATTEMPTS + 1):
        with pytest.raises(RuntimeError):
            assistant.learn(assistant.stored_turn(episode))
        clock.now += turn_learning.RETRY_AFTER * attempt
    given_up = turn_learning.given_up(db)
    result = MemoryManager(db, embedder).forget_everything()
    assert turn_learning.given_up(db) == [] and db.scalar("SELECT count(*) FROM turn_learning") == 0
    wipe.bring_back(db, result.backup)
    assert turn_learning.given_up(db) == given_up and pending_learning(db) == []
    db.close()
