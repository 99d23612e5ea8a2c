"""The simulated user of bench/forgetting.py: what they talk about, what they ask back, what they restore.

Each day the user says 4 turns and Engram keeps 2 facts on family, errands, work and hobbies (30/20/25/25 %); from
day 10 they ask twice a day about something said at least 5 days before (family 60 %, work and hobbies 20 % each,
never an errand). A forgotten thing asked for is restored if about family (work and hobbies one time in four); a
weekly look at the forgetting log restores half of its family items (work and hobbies one in twenty, errands never).
Drawn once from a seed (make_plan), the same for both arms; the user's coin (chance) is the same in both arms for the
same item and moment.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

SUBJECTS = {
    "family": ["My sister Ana", "My brother Tom", "My mother", "My father", "My daughter Mia", "My son Leo",
               "Grandma Rose", "My cousin Sam", "Aunt Clara", "My nephew Ben", "My wife Elena", "Uncle Victor"],
    "errands": ["The dry cleaning", "The parcel at the post office", "The car's oil change", "The electricity bill",
                "The library books", "The broken toaster", "The gym membership renewal", "The dentist appointment",
                "The recycling bins", "The passport photos", "The bike tyre", "The printer ink"],
    "work": ["My manager Paula", "My colleague Raj", "The design team", "The client from Berlin", "My intern Jonas",
             "The finance department", "Our new CTO", "The support team", "My desk neighbour Kim",
             "The project lead Omar", "The marketing group", "The hiring committee"],
    "hobbies": ["My sourdough baking", "My vegetable garden", "My chess practice", "My guitar playing",
                "My running", "My watercolour painting", "My book club", "My bird watching", "My climbing",
                "My photography", "My model railway", "My yoga"],
}
PREDICATES = {  # (what is said, how the user asks about it later; {s} is the subject)
    "family": [("is starting a pottery class on Thursday evenings.", "What class is {s} taking?"),
               ("moved into a new flat near the river.", "Where does {s} live now?"),
               ("would love a warm scarf for the coming birthday.", "What birthday gift would {s} like?"),
               ("has been unwell and saw a doctor this week.", "How is {s}'s health?"),
               ("got a new job at the hospital as a nurse.", "Where does {s} work now?"),
               ("is planning a summer trip to Portugal.", "Where is {s} travelling this summer?"),
               ("adopted a grey kitten called Pepper.", "What pet does {s} have?"),
               ("is learning to play the violin.", "What instrument is {s} learning?"),
               ("called me about our childhood holidays by the sea.", "What did {s} call me about?"),
               ("is getting married next spring in the countryside.", "When is {s} getting married?"),
               ("started training for a half marathon.", "What is {s} training for?"),
               ("is worried about the exams at university.", "What is {s} worried about?")],
    "errands": [("has to be sorted out before Friday.", "When is {s} due?"),
                ("must be handled on Tuesday morning.", "When do I handle {s}?"),
                ("keeps slipping my mind this week.", "What keeps slipping my mind?"),
                ("needs doing on the way home from work.", "When should I do {s}?"),
                ("should be done this weekend.", "What is planned for the weekend?"),
                ("costs about twenty euros, I checked.", "How much does {s} cost?"),
                ("has to wait until payday.", "What waits until payday?"),
                ("is on my to-do list for tomorrow.", "What is on tomorrow's list?"),
                ("needs a quick phone call first.", "What needs a phone call?"),
                ("can be done near the supermarket.", "What can I do near the supermarket?"),
                ("is overdue by a few days now.", "What is overdue?"),
                ("needs to happen before the holidays.", "What must happen before the holidays?")],
    "work": [("wants the quarterly report rewritten by Monday.", "What does {s} want rewritten?"),
             ("moved the product launch to next month.", "When is the launch that {s} moved?"),
             ("asked me to review the onboarding slides.", "What did {s} ask me to review?"),
             ("is unhappy with the database migration plan.", "What is {s} unhappy with?"),
             ("scheduled a workshop on customer interviews.", "What workshop did {s} schedule?"),
             ("approved the budget for new laptops.", "What budget did {s} approve?"),
             ("needs the test results before the release.", "What does {s} need before the release?"),
             ("is reorganising the team into two squads.", "How is {s} reorganising the team?"),
             ("praised my presentation on pricing.", "Which presentation did {s} praise?"),
             ("requested a weekly status email.", "What did {s} request every week?"),
             ("is hiring two more engineers.", "Who is {s} hiring?"),
             ("raised concerns about the security audit.", "What concerns did {s} raise?")],
    "hobbies": [("is going better since I changed the schedule.", "How is {s} going?"),
                ("needs new equipment, the old one wore out.", "What does {s} need?"),
                ("gave me a great result last Sunday.", "What happened with {s} last Sunday?"),
                ("takes about an hour every morning now.", "How long does {s} take?"),
                ("got me talking to a friendly group of people.", "Who did I meet through {s}?"),
                ("was frustrating this week, nothing worked.", "Why was {s} frustrating?"),
                ("is something I want to do on holiday too.", "What do I want to do on holiday?"),
                ("taught me a new technique from a video.", "What technique did I learn for {s}?"),
                ("costs more than I expected this year.", "How expensive is {s}?"),
                ("is my favourite way to relax after work.", "How do I relax after work?"),
                ("won me a small prize at a local contest.", "What prize did {s} win me?"),
                ("is on pause because of my sore wrist.", "Why is {s} on pause?")],
}
TOPIC_SHARE = {"family": 0.30, "errands": 0.20, "work": 0.25, "hobbies": 0.25}  # what the user talks about
ASK_SHARE = {"family": 0.60, "work": 0.20, "hobbies": 0.20}  # what the user asks about later: never errands
RESTORE_ON_MISS = {"family": 1.0, "work": 0.25, "hobbies": 0.25, "errands": 0.0}
RESTORE_ON_REVIEW = {"family": 0.5, "work": 0.05, "hobbies": 0.05, "errands": 0.0}


@dataclass(frozen=True)
class Item:
    key: str  # stable across arms
    kind: str  # memory / episode
    topic: str
    text: str
    question: str
    day: int


@dataclass
class Plan:
    days: int
    said: list[list[Item]]  # per day
    asks: list[list[Item]]  # per day



def make_plan(days: int, seed: int, turns_per_day: int = 4, facts_per_day: int = 2) -> Plan:
    """What the user says and asks each day: drawn once from the seed, the same for both arms."""
    rng = np.random.default_rng(seed)
    pools = {(kind, topic): [(s, p) for s in range(len(SUBJECTS[topic])) for p in range(len(PREDICATES[topic]))]
             for kind in ("episode", "memory") for topic in TOPIC_SHARE}
    for pool in pools.values():
        rng.shuffle(pool)
    topics, share = list(TOPIC_SHARE), np.array(list(TOPIC_SHARE.values()))
    said, asks, past = [], [], []
    for day in range(days):
        today = []
        for kind, n in (("episode", turns_per_day), ("memory", facts_per_day)):
            for _ in range(n):
                topic = next(t for t in rng.choice(topics, size=8, p=share) if pools[(kind, t)])
                s, p = pools[(kind, topic)].pop()
                today.append(_item(kind, topic, s, p, day))
        said.append(today)
        askable = [i for i in past if i.day <= day - 5]
        asks.append([_pick(rng, askable) for _ in range(2)] if day >= 10 and askable else [])
        past.extend(today)
    return Plan(days, said, asks)


def _item(kind: str, topic: str, s: int, p: int, day: int) -> Item:
    subject, (predicate, question) = SUBJECTS[topic][s], PREDICATES[topic][p]
    statement = f"{subject} {predicate}"
    text = statement if kind == "episode" else f"The user said: {statement[0].lower()}{statement[1:]}"
    return Item(f"{kind}:{topic}:{s}:{p}", kind, topic, text, question.format(s=subject[0].lower() + subject[1:]),
                day)


def _pick(rng: np.random.Generator, askable: list[Item]) -> Item:
    topics = [t for t in ASK_SHARE if any(i.topic == t for i in askable)]
    share = np.array([ASK_SHARE[t] for t in topics])
    topic = rng.choice(topics, p=share / share.sum())
    chosen = [i for i in askable if i.topic == topic]
    return chosen[int(rng.integers(len(chosen)))]


def chance(seed: int, *parts: object) -> float:
    """A deterministic coin for the user's choices, the same in both arms for the same item and moment."""
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64
