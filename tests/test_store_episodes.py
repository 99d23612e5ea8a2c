"""Episodes and sessions: chat turns with protection, trash and restore."""
from __future__ import annotations

import pytest

from core.errors import InvalidInput, NotFound
from core.store import episodes as e
from core.store import sessions as s


def test_sessions_group_episodes(db, clock):
    session = s.create_session(db, "Trip planning", instructions="Be brief.")
    first = e.add_episode(db, "Where should we go in May?", "Lisbon is lovely then.", session_id=session)
    clock.advance(60)
    second = e.add_episode(db, "Book the train", session_id=session, metadata={"source": "test"})
    assert [ep.id for ep in e.list_episodes(db, session_id=session)] == [second, first]
    assert e.get_episode(db, second).metadata == {"source": "test"}
    assert s.get_session(db, session).instructions == "Be brief."
    clock.advance(5)
    assert s.rename_session(db, session, "May trip").title == "May trip"
    ended = s.end_session(db, session)
    assert ended.ended_at == clock.now == ended.updated_at
    assert s.set_instructions(db, session, "Use metric units.").instructions == "Use metric units."
    assert s.mark_reflected(db, session).reflected_at == clock.now
    assert [x.id for x in s.list_sessions(db)] == [session]


def test_unknown_sessions_and_episodes(db):
    with pytest.raises(NotFound):
        e.add_episode(db, "hello", session_id=42)
    with pytest.raises(NotFound):
        s.get_session(db, 42)
    with pytest.raises(NotFound):
        e.get_episode(db, 42)
    with pytest.raises(InvalidInput, match="not a valid episode id"):
        e.get_episode(db, "forty-two")
    assert db.scalar("SELECT count(*) FROM episodes") == 0


def test_protect_trash_and_restore(db, clock):
    episode = e.add_episode(db, "My daughter was born today")
    assert e.set_episode_protected(db, episode, True).protected
    with pytest.raises(InvalidInput, match="protected"):
        e.trash_episode(db, episode)
    e.set_episode_protected(db, episode, False)
    assert e.trash_episode(db, episode).deleted_at == clock.now
    assert e.list_episodes(db) == [] and [x.id for x in e.list_episodes(db, status="trashed")] == [episode]
    assert e.trashed_episode_ids(db) == [episode]
    with pytest.raises(InvalidInput, match="already in the trash"):
        e.trash_episode(db, episode)
    assert e.restore_episode(db, episode).deleted_at is None
    with pytest.raises(InvalidInput, match="nothing to restore"):
        e.restore_episode(db, episode)


def test_purging_an_episode_needs_it_in_the_trash(db):
    episode = e.add_episode(db, "temporary")
    with pytest.raises(InvalidInput, match="not in the trash"):
        e.purge_episode_rows(db, [episode])
    e.trash_episode(db, episode)
    assert e.purge_episode_rows(db, [episode]) == 1
    with pytest.raises(NotFound):
        e.get_episode(db, episode)


def test_bad_episode_text_is_refused(db):
    for text in ("", "   \n", "nul\x00byte", b"\xff\xfe bad utf-8", "x" * 1_000_001):
        with pytest.raises(InvalidInput):
            e.add_episode(db, text)
    with pytest.raises(InvalidInput):
        s.create_session(db, "t" * 501)
    assert db.scalar("SELECT count(*) FROM episodes") == 0
    assert db.scalar("SELECT count(*) FROM sessions") == 0
