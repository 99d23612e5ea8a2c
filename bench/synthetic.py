"""Synthetic personal-memory sentences for the recall benchmark: varied, deterministic, no data files.

Each sentence combines a person, an action, a thing, a place and a time from word lists, so a store of
a million rows has almost no exact duplicates yet reads like what a user tells an assistant.
"""
from __future__ import annotations

import random

PEOPLE = ("I", "My sister", "My brother", "My mother", "My father", "My wife", "My husband", "My friend Ana",
          "My colleague Tom", "My neighbour Li", "My son", "My daughter", "My boss", "My cousin Raj", "Grandma",
          "My partner", "Our dog Rex", "My flatmate Jo", "My teacher", "My doctor")
ACTIONS = ("loves", "hates", "bought", "is learning", "wants to try", "lost", "fixed", "painted", "cooked",
           "planned", "visited", "booked", "sold", "borrowed", "recommended", "forgot", "started", "finished",
           "is allergic to", "collects", "dreams about", "is afraid of", "wrote about", "photographed")
THINGS = ("a red bicycle", "sourdough bread", "the violin", "Italian lessons", "a trip to Lisbon", "vintage vinyl",
          "rock climbing", "a new laptop", "peanuts", "the garden shed", "a marathon", "chess openings",
          "a watercolour of the harbour", "the quarterly report", "homemade ramen", "a kayak", "oat milk",
          "jazz piano", "a birthday cake", "the old Volvo", "a tent for camping", "Japanese pottery",
          "a yoga retreat", "the tax return", "a sci-fi novel", "board games", "a telescope", "spicy curry",
          "a job interview", "the kitchen tiles", "knitting a scarf", "salsa dancing", "a podcast on history",
          "strawberry jam", "a hiking trail", "the dentist appointment", "a puppy", "sailing lessons",
          "a wedding speech", "cold brew coffee", "an electric guitar", "a vegetable patch", "a robot kit")
PLACES = ("in Paris", "at the office", "at home", "in the park", "near the lake", "at the market",
          "in Berlin", "at school", "in the mountains", "at the beach", "downtown", "in Tokyo", "at the gym",
          "at the library", "in the garage", "at a cafe", "in Rome", "on the train", "at the hospital", "online")
TIMES = ("last Monday", "yesterday", "every weekend", "in March", "last summer", "this morning", "two years ago",
         "at Christmas", "on her birthday", "next month", "every evening", "in 2019", "during the holidays",
         "on Friday night", "since childhood", "last winter", "after work", "in the spring", "on Sundays", "today")
CODAS = ("", "", "", " and it went well", " but it was expensive", " and wants to do it again",
         " with friends", " for the first time", " because it was on sale", " and told everyone about it")


def sentences(count: int, *, seed: int = 7) -> list[str]:
    """`count` distinct-looking memory statements, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append(f"{rng.choice(PEOPLE)} {rng.choice(ACTIONS)} {rng.choice(THINGS)} {rng.choice(PLACES)} "
                   f"{rng.choice(TIMES)}{rng.choice(CODAS)}.")
    return out


def queries(count: int, *, seed: int = 11) -> list[str]:
    """Questions a user might ask of such a store (different seed: not copies of stored rows)."""
    rng = random.Random(seed)
    forms = ("What does {p} think about {t}?", "When did {p} deal with {t}?", "Who {a} {t}?",
             "Tell me about {t} {pl}.", "Anything about {t} {tm}?")
    return [rng.choice(forms).format(p=rng.choice(PEOPLE).lower(), t=rng.choice(THINGS), a=rng.choice(ACTIONS),
                                     pl=rng.choice(PLACES), tm=rng.choice(TIMES)) for _ in range(count)]
