"""The stores the fine-tune tests and bench/finetune.py start from (issue 42's "first hour" of a new user)."""
from __future__ import annotations

from core.store.episodes import add_episode
from core.store.memories import add_memory, set_flag

FACTS = (
    ("user", "dog", "Rex", "The user's dog is named Rex."),
    ("user", "job", "music teacher", "The user works as a music teacher."),
    ("user", "drink", "green tea", "The user drinks green tea every morning."),
    ("user", "sport", "swimming", "The user swims on Tuesdays."),
    ("user", "sister", "Ana", "The user's sister is called Ana."),
)
# Rated the way a new user rates: replies about what they just told Engram, and one general answer.
RATED = (
    ("What should I get Rex for his birthday?", "A new chew toy would suit Rex, and maybe a long walk by the sea."),
    ("Any tips for my swim on Tuesday?", "Warm up for ten minutes before your swimming set on Tuesday."),
    ("How do I boil an egg?", "Simmer it for 8 minutes, then cool it in cold water."),
)


def first_hour_store(db) -> dict:
    """Five facts, a pinned move, a critical allergy, a few replies rated good."""
    facts = [add_memory(db, statement, subject=s, relation=r, object=o, confidence=0.9) for s, r, o, statement in FACTS]
    moved = add_memory(db, "The user moved to Lisbon in March.", subject="user", relation="lives_in",
                       object="Lisbon", confidence=0.9)
    set_flag(db, moved, "pinned", True)
    allergy = add_memory(db, "The user is allergic to peanuts.", subject="user", relation="allergy",
                         object="peanuts", critical=True, confidence=0.95)
    rated = []
    for question, reply in RATED:
        rated.append(add_episode(db, question, reply))
        db.execute("UPDATE episodes SET rating = 1 WHERE id = ?", (rated[-1],))
    return {"facts": facts + [moved, allergy], "rated": rated}


def say_standing_instructions(db) -> list[int]:
    """The same user, a little later: how they want every answer."""
    return [add_episode(db, "Use metric units from now on, please.", "Will do."),
            add_episode(db, "Shorter answers, please.", "Sure.")]
