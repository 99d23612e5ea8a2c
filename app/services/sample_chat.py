"""The sample folder's newest conversation, holding what the chat shows under its turns: a fact a turn taught
(Remembered, with Undo), the memories a reply recalled and drew on, a message edited and sent again (‹ 2/2 › under
it, the first version kept), a regenerated reply (‹ 2/2 › under it) and a code block (highlighted, with Copy code).
Written through the store's own functions, as the chat writes them (app/services/sample_data.py calls it)."""
from __future__ import annotations

from typing import Any

from core.memory.index import index_episodes
from core.memory.manage import MemoryManager
from core.store import branches, turns
from core.store.episodes import add_episode
from core.store.sessions import create_session

DAY = 86400.0
TITLE = "Practice plan"
SCALES = ("I practise scales on the cello every morning before work.",
          "A good habit. Ten minutes of slow scales keeps your intonation clean.")
FIRST_ASK = ("Which key should I start in?", "C major: no sharps or flats to think about.")
EDITED_ASK = "Which minor key should I start in? Give me a drill I can paste into my practice app."
EDITED_REPLY = ("A minor: it shares C major's notes. A drill, one octave up and down:\n\n"
                "```python\nNOTES = [\"A\", \"B\", \"C\", \"D\", \"E\", \"F\", \"G\"]\n"
                "for round in range(3):  # slowly, then faster\n    print(\" \".join(NOTES + NOTES[::-1]))\n```\n\n"
                "Bring it to Ana on Tuesday.")
EARLIER_REPLY = "A minor, then E minor once it feels easy."
TAUGHT = "User practises cello scales every morning"


def add_practice_conversation(db: Any, embedder: Any, clock: Any, now: float, ids: dict[str, int]) -> list[int]:
    """The conversation, a day old; returns its turns (the edited message's first version included)."""
    clock.now = now - DAY
    session = create_session(db, TITLE)
    first = add_episode(db, *SCALES, session_id=session, created_at=clock.now)
    clock.now += 30
    MemoryManager(db, embedder).add(TAUGHT, subject="user", relation="practises", object="cello scales",
                                    source_episode_ids=[first], reason="learned in conversation")
    asked = add_episode(db, *FIRST_ASK, session_id=session, created_at=clock.now + 60)
    branches.hide_line(db, asked)  # the user edited the question and sent it again
    edited = add_episode(db, EDITED_ASK, EDITED_REPLY, session_id=session, created_at=clock.now + 120,
                         metadata={"edit_of": asked, "earlier_replies": [EARLIER_REPLY], "reanswered": 1})
    lessons = [ids["User's cello teacher is Ana"], ids["User's cello lesson is on Tuesdays at six"],
               ids["User takes cello lessons"]]
    turns.record_used(db, first, [(lessons[2], 0.7, False)], drew_on=[lessons[2]])
    turns.record_used(db, edited, [(lessons[0], 0.8, False), (lessons[1], 0.6, False)], drew_on=[lessons[0]])
    index_episodes(db, embedder, [first, asked, edited])
    return [first, asked, edited]
