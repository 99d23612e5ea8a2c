"""How a preference about answers is SHOWN: for each kind of preference Engram recognises in a confirmed hypothesis
or a standing instruction ("metric units", "shorter answers", "no emojis"), a few situations where it should show,
each a question and a reply that follows it.

A fine-tune learns the behaviour from these demonstrations, never the sentence stating the preference. Each kind's
situations are split by situation: TRAIN ones are trained on, PROBE ones (other topics, e.g. a travel question for
metric units) are only scored by the gate, so a probe is a new situation, never a rephrasing of a training example.
A preference of no kind below teaches nothing here (the dataset says so); rated replies may still carry it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Demo:
    prompt: str
    reply: str  # follows the preference
    contrast: str = ""  # the same answer ignoring it: the rejected side of a preference pair


@dataclass(frozen=True)
class Style:
    name: str
    pattern: re.Pattern
    train: tuple[Demo, ...]
    probes: tuple[Demo, ...]


def _re(text: str) -> re.Pattern:
    return re.compile(text, re.IGNORECASE)


STYLES = (
    Style("metric_units", _re(r"\bmetric\b|kilomet|celsius|\bkm\b|kilogram|\bSI units\b"), train=(
        Demo("How long is a marathon?", "A marathon is 42.2 kilometres.", "A marathon is 26.2 miles."),
        Demo("What oven temperature do I need for bread?", "Bake it at about 220 °C for 30 to 35 minutes.",
             "Bake it at about 425 °F for 30 to 35 minutes."),
        Demo("How much does a house cat usually weigh?", "A house cat usually weighs 4 to 5 kilograms.",
             "A house cat usually weighs 9 to 11 pounds."),
        Demo("How tall is the Eiffel Tower?", "The Eiffel Tower is about 330 metres tall.",
             "The Eiffel Tower is about 1,083 feet tall."),
    ), probes=(
        Demo("I'm driving from Paris to Lyon tomorrow. How far is it?",
             "Paris to Lyon is about 465 kilometres by road, roughly four and a half hours.",
             "Paris to Lyon is about 290 miles by road, roughly four and a half hours."),
        Demo("What weather should I pack for in Rome in July?",
             "Rome in July is hot: daytime highs around 31 °C and nights near 20 °C.",
             "Rome in July is hot: daytime highs around 88 °F and nights near 68 °F."),
    )),
    Style("short_answers", _re(r"\bshort(er)?\b|\bbrief\b|\bconcise\b|to the point|one sentence|"
                               r"two or three sentences|less verbose"), train=(
        Demo("Why is the sky blue?", "Air scatters blue light more than red, so the sky looks blue.",
             "Great question! The colour of the sky comes from a process called Rayleigh scattering. Sunlight "
             "contains every colour, and as it passes through the atmosphere the short blue wavelengths are "
             "scattered far more than the long red ones, so blue light reaches your eyes from every direction."),
        Demo("How do I boil an egg?", "Simmer it for 8 minutes, then cool it in cold water.",
             "Boiling an egg is easy once you know the steps. First, place the egg in a pan and cover it with cold "
             "water. Bring it to the boil, then lower the heat and let it simmer for about eight minutes."),
        Demo("What does a router do?", "It passes data between your devices and the internet.",
             "A router is a networking device that has several jobs. It connects the devices on your home network "
             "to each other and to the internet, assigns them addresses and directs traffic between them."),
        Demo("Should I water cactus often?", "No: once every two or three weeks is plenty.",
             "Cacti are desert plants, so they have adapted to survive long periods without rain. This means that "
             "in most homes you should water them rarely, perhaps once every two or three weeks."),
    ), probes=(
        Demo("What is a good way to learn a new language?", "Practise a little every day and speak it early.",
             "Learning a new language is a rewarding journey, and there are many approaches. Most people benefit "
             "from daily practice, a mix of listening and reading, and speaking with native speakers early on."),
        Demo("Why do cats purr?", "Mostly to show contentment, and sometimes to soothe themselves.",
             "Cats purr for a number of reasons, and scientists are still studying the exact mechanism. Most often "
             "purring signals contentment, but cats also purr when stressed, hurt or giving birth."),
    )),
    Style("no_emojis", _re(r"emoji|emoticon|smiley"), train=(
        Demo("Say happy birthday to my brother.", "Happy birthday! I hope your year ahead is a great one.",
             "Happy birthday! 🎉🎂 I hope your year ahead is a great one! 🥳"),
        Demo("Any tips for a rainy weekend?", "Try a long film, a new recipe, or a board game with friends.",
             "☔ Try a long film 🎬, a new recipe 🍲, or a board game with friends 🎲!"),
        Demo("Congratulate my team on the launch.", "Congratulations to the whole team on a successful launch.",
             "Congratulations to the whole team on a successful launch! 🚀🎉"),
        Demo("What should I pack for the beach?", "Sunscreen, a towel, water and a hat.",
             "🏖️ Sunscreen ☀️, a towel, water 💧 and a hat 👒!"),
    ), probes=(
        Demo("Write a short thank-you note for my neighbour.", "Thank you for watering my plants while I was away.",
             "Thank you for watering my plants while I was away! 🌱😊"),
        Demo("Suggest a fun Friday night plan.", "Cook a new dish, then watch a comedy with friends.",
             "🍝 Cook a new dish, then watch a comedy 😂 with friends! 🎉"),
    )),
    Style("numbered_steps", _re(r"numbered|step[- ]by[- ]step|\bsteps\b"), train=(
        Demo("How do I make tea?", "1. Boil water.\n2. Pour it over the tea.\n3. Steep for three minutes.",
             "Boil water, pour it over the tea and steep for three minutes."),
        Demo("How do I reset my router?", "1. Unplug it.\n2. Wait thirty seconds.\n3. Plug it back in.",
             "Unplug it, wait thirty seconds and plug it back in."),
        Demo("How do I change a bike tyre?", "1. Remove the wheel.\n2. Lever off the tyre.\n3. Fit the new tube "
             "and tyre.\n4. Pump it up.", "Remove the wheel, lever off the tyre, fit the new tube and pump it up."),
        Demo("How do I plant a tree?", "1. Dig a wide hole.\n2. Set the tree in it.\n3. Fill with soil.\n"
             "4. Water well.", "Dig a wide hole, set the tree in it, fill with soil and water well."),
    ), probes=(
        Demo("How do I back up my phone?", "1. Connect to Wi-Fi.\n2. Open Settings.\n3. Choose Backup.\n"
             "4. Tap Back up now.", "Connect to Wi-Fi, open Settings, choose Backup and tap Back up now."),
        Demo("How do I cook rice?", "1. Rinse the rice.\n2. Add twice as much water.\n3. Simmer covered for "
             "fifteen minutes.", "Rinse the rice, add twice as much water and simmer it covered for fifteen minutes."),
    )),
    Style("british_spelling", _re(r"british|\bUK spelling|\bUK English"), train=(
        Demo("What colour is a ripe banana?", "A ripe banana's colour is yellow.",
             "A ripe banana's color is yellow."),
        Demo("How do I organise my desk?", "Organise it by keeping only today's work in front of you.",
             "Organize it by keeping only today's work in front of you."),
        Demo("What is a good centre for a table?", "A bowl of fruit makes a good centre for a table.",
             "A bowl of fruit makes a good center for a table."),
        Demo("What is my favourite way to relax, usually?", "A favourite way to relax is a walk after dinner.",
             "A favorite way to relax is a walk after dinner."),
    ), probes=(
        Demo("How should I analyse my monthly spending?", "Analyse it by sorting each expense into a category.",
             "Analyze it by sorting each expense into a category."),
        Demo("What does a theatre usher do?", "A theatre usher shows people to their seats.",
             "A theater usher shows people to their seats."),
    )),
    Style("python_examples", _re(r"\bpython\b"), train=(
        Demo("How do I reverse a list?", "In Python: `items[::-1]` or `items.reverse()`.",
             "In JavaScript: `items.reverse()`."),
        Demo("How do I read a file line by line?", "In Python:\n```python\nfor line in open('notes.txt'):\n"
             "    print(line)\n```", "In Java, use a BufferedReader and call readLine() in a loop."),
        Demo("How do I sort numbers?", "In Python: `sorted(numbers)`.", "In C: call qsort with a comparator."),
        Demo("How do I join words with commas?", "In Python: `', '.join(words)`.",
             "In JavaScript: `words.join(', ')`."),
    ), probes=(
        Demo("How do I count words in a sentence?", "In Python: `len(sentence.split())`.",
             "In JavaScript: `sentence.split(' ').length`."),
        Demo("How do I get today's date?", "In Python: `datetime.date.today()`.", "In JavaScript: `new Date()`."),
    )),
    Style("informal_tone", _re(r"informal|casual|\bwarm\b|friendly|jargon|plain words|plain language"), train=(
        Demo("My code finally works.", "Nice one! That feeling never gets old.",
             "Acknowledged. The successful execution of the code has been noted."),
        Demo("What is a cache?", "It's a handy stash of stuff you used recently, so it's quicker to grab again.",
             "A cache is a hardware or software component that stores data to serve future requests faster."),
        Demo("I failed my driving test.", "Oh no, sorry! Loads of people pass the second time, you've got this.",
             "Failure in a driving examination is common; a subsequent attempt is recommended."),
        Demo("What is inflation?", "It's when prices creep up, so the same money buys a bit less.",
             "Inflation is the rate of increase of the general price level, eroding purchasing power."),
    ), probes=(
        Demo("I just got a puppy!", "Aw, congrats! Get ready for lots of cuddles and chewed socks.",
             "Congratulations on the acquisition of a canine companion."),
        Demo("What is a VPN?", "It's like a private tunnel for your internet traffic, so others can't peek.",
             "A VPN is an encrypted network overlay that tunnels traffic through a remote endpoint."),
    )),
)


def style_of(text: str) -> Style | None:
    """The kind of preference a claim or instruction names, or None."""
    return next((s for s in STYLES if s.pattern.search(text)), None)


# A standing instruction: said to hold from now on, not for one answer ("always", "from now on", "in future")
# — or a bare request of a few words ("Shorter answers, please.").
_STANDING = _re(r"\bfrom now on\b|\balways\b|\bnever\b|\bin (the )?future\b|\bgoing forward\b|\bstop using\b|"
                r"\bno more\b|\bevery time\b|\ball your (answers|replies)\b|\bin every (answer|reply|conversation)\b")
MAX_BARE_WORDS = 6
# What SQL narrows the turns to before the patterns run (LIKE is case-blind for ASCII): every cue of _STANDING.
STANDING_CUES = ("from now on", "always", "never", "future", "going forward", "stop using", "no more", "every time",
                 "all your", "in every")
MAX_INSTRUCTION_CHARS = 300  # an instruction is a sentence or two, not a paste
BARE_CHARS = 60  # six words fit
_ABOUT_ANSWERS = _re(r"answer|repl|response|please|units|emoji|spelling|steps|tone|examples")


def standing_instruction(user_text: str) -> Style | None:
    """The style a user's message asks for in every conversation ("no emojis from now on"), or None."""
    if len(user_text) > MAX_INSTRUCTION_CHARS or "?" in user_text:
        return None
    style = style_of(user_text)
    if style is None:
        return None
    bare = len(user_text.split()) <= MAX_BARE_WORDS and _ABOUT_ANSWERS.search(user_text)
    if _STANDING.search(user_text) or bare:
        return style
    return None
