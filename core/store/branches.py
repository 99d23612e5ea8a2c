"""Branches of a conversation: a sent message edited and sent again, the earlier branch kept and reachable, as Jan
and ChatGPT keep it ("‹ 1/2 ›" on the edited message).

No turn is ever removed. A turn an edit replaced, and every turn shown after it, leave the shown path: their
episode metadata says `off_path`, with `hidden_with`, the turn whose replacement hid them (the branch's head). The
new turn says `edit_of`, the first version of the message it is another version of; the versions of a message are
that first turn and every turn whose `edit_of` names it. Showing another version hides the shown one's line the same
way and brings back the line that was hidden with the chosen head, as it was when it was left.

The shown path is what the conversation is (what the window shows, what the model is given as the conversation).
Turns off the path stay in memory: the user said them, so they stay searchable and may be recalled as an earlier
turn (quoted with the day they were said), and what they taught stays, with Undo under their reply.
"""
from __future__ import annotations

from core.store.db import Database

ON_PATH_SQL = "json_extract(metadata, '$.off_path') IS NULL"


def root_of(db: Database, episode_id: int) -> int:
    """The first version of this turn's message (itself, unless it is an edit)."""
    root = db.scalar("SELECT json_extract(metadata, '$.edit_of') FROM episodes WHERE id = ?", (int(episode_id),))
    return int(root) if root is not None else int(episode_id)


def versions(db: Database, episode_id: int) -> list[int]:
    """Every version of this turn's message, oldest first (one when it was never edited)."""
    root = root_of(db, episode_id)
    later = [int(r[0]) for r in db.execute(  # within the conversation: its index, not a scan of every turn
        "SELECT id FROM episodes WHERE session_id = (SELECT session_id FROM episodes WHERE id = ?) AND "
        "json_extract(metadata, '$.edit_of') = ? AND deleted_at IS NULL ORDER BY id", (root, root))]
    return [root, *later]


def version_counts(db: Database, episode_ids: list[int]) -> dict[int, tuple[int, int]]:
    """For each turn that has other versions: (its position from 1, how many there are). One read per
    conversation the turns are in, however many turns."""
    wanted = {int(i) for i in episode_ids}
    sessions = {r[0] for r in db.execute(
        f"SELECT DISTINCT session_id FROM episodes WHERE id IN ({','.join('?' * len(wanted)) or 'NULL'})",
        sorted(wanted)) if r[0] is not None}
    groups: dict[int, list[int]] = {}
    for session_id in sessions:
        for episode_id, root in db.execute(
                "SELECT id, json_extract(metadata, '$.edit_of') FROM episodes WHERE session_id = ? AND "
                "json_extract(metadata, '$.edit_of') IS NOT NULL AND deleted_at IS NULL ORDER BY id", (session_id,)):
            groups.setdefault(int(root), [int(root)]).append(int(episode_id))
    found = {}
    for group in groups.values():
        for position, episode_id in enumerate(group, 1):
            if episode_id in wanted:
                found[episode_id] = (position, len(group))
    return found


def line_from(db: Database, episode_id: int) -> list[int]:
    """The turns shown from this one on, in the order said: what an edit of it, or another version, replaces."""
    row = db.query_one("SELECT session_id, created_at FROM episodes WHERE id = ?", (int(episode_id),))
    if row is None or row["session_id"] is None:
        return [int(episode_id)]
    return [int(r[0]) for r in db.execute(
        f"SELECT id FROM episodes WHERE session_id = ? AND {ON_PATH_SQL} AND (created_at > ? OR "
        "(created_at = ? AND id >= ?)) ORDER BY created_at, id",
        (row["session_id"], row["created_at"], row["created_at"], int(episode_id)))]


def hide_line(db: Database, head_id: int) -> list[int]:
    """Take the turn and the turns shown after it off the path, remembered as the line under `head_id`."""
    hidden = line_from(db, head_id)
    for episode_id in hidden:
        db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.off_path', 1, '$.hidden_with', ?) "
                   "WHERE id = ?", (int(head_id), episode_id))
    return hidden


def show_version(db: Database, shown_id: int, chosen_id: int) -> None:
    """Show another version of a message: the shown one's line leaves the path, the chosen one's comes back."""
    if root_of(db, shown_id) != root_of(db, chosen_id):
        raise ValueError(f"turn {chosen_id} is not a version of turn {shown_id}")
    if int(shown_id) == int(chosen_id):
        return
    with db.transaction():
        hide_line(db, shown_id)
        db.execute("UPDATE episodes SET metadata = json_remove(metadata, '$.off_path', '$.hidden_with') "
                   "WHERE session_id = (SELECT session_id FROM episodes WHERE id = ?) AND "
                   "json_extract(metadata, '$.hidden_with') = ?", (int(chosen_id), int(chosen_id)))
