"""What a fine-tune learns from (issue 42): how the user likes answers, shown in demonstrations, never a fact; probes
held out by item; the recipe chosen from the data's size, and the floor below which nothing is queued."""
from __future__ import annotations

import json

import pytest

from core.finetune.dataset import build_training_set
from core.finetune.recipe import MIN_EXAMPLES, readiness, recipe_for
from core.finetune.styles import STYLES, standing_instruction, style_of
from core.store.episodes import add_episode, trash_episode
from core.store.hypotheses import add_hypothesis, decide
from core.store.memories import add_memory, trash_memory
from core.store.sessions import create_session, trash_session
from core.store.turns import replace_reply
from tests.finetune_store import first_hour_store, say_standing_instructions


def texts(training):
    out = [m["content"] for ex in training.examples for m in ex["messages"]]
    out += [p[k] for p in training.pairs for k in ("chosen", "rejected")]
    return out + [t for p in training.probes for t in (p.question, p.answer, p.rejected)]


def confirmed(db, claim, dimension="style"):
    hypothesis_id = add_hypothesis(db, dimension, claim, 0.9)
    decide(db, hypothesis_id, "confirmed")
    return hypothesis_id


def test_a_store_full_of_facts_gives_no_training_example_built_from_a_fact(db):
    statements = [f"The user's friend number {i} lives in city {i * 7 % 13} and likes tea." for i in range(40)]
    ids = [add_memory(db, s, subject=f"friend {i}", relation="home", object=f"city {i * 7 % 13}", confidence=0.95)
           for i, s in enumerate(statements)]
    rex = add_memory(db, "The user's dog is named Rex.", subject="user", relation="dog", object="Rex", confidence=1)
    talk = add_episode(db, "Who lives where?", "Your friend number 3 lives in city 8 and likes tea.")
    dog = add_episode(db, "Name a good toy for my dog", "Rex would love a rope toy.")
    db.execute("UPDATE episodes SET rating = 1 WHERE id IN (?, ?)", (talk, dog))
    training = build_training_set(db)
    assert training.examples == [] and training.pairs == [] and training.probes == []
    assert training.memory_ids == [] and training.episode_ids == []
    every_word = " ".join(texts(training))
    assert all(s not in every_word for s in statements) and "Rex" not in every_word
    assert sorted(training.skipped) == sorted(f"episode {e}: the reply restates something in memory"
                                              for e in (talk, dog))
    assert ids and rex


def test_a_confirmed_preference_becomes_demonstrations_not_its_statement_and_probes_are_new_situations(db):
    short = confirmed(db, "The user prefers short answers of two or three sentences.")
    unknown = confirmed(db, "The user enjoys historical context.")
    add_hypothesis(db, "units", "The user wants metric units.", 0.5)  # open, not confirmed: nothing
    training = build_training_set(db)
    style = next(s for s in STYLES if s.name == "short_answers")
    assert training.styles == ["short_answers"] and training.hypothesis_ids == [short]
    assert sorted(ex["messages"][-1]["content"] for ex in training.examples) == sorted(d.reply for d in style.train)
    assert all("prefers" not in t for t in texts(training))  # the behaviour, never the sentence stating it
    trained_prompts = {ex["messages"][0]["content"] for ex in training.examples}
    assert [p.question for p in training.probes] == [d.prompt for d in style.probes]
    assert not trained_prompts & {p.question for p in training.probes}  # held out by situation
    assert all(p.kind == "preference" and p.item_id == short and p.rejected for p in training.probes)
    assert len(training.pairs) == len(style.train)  # each demonstration against the same answer ignoring it
    assert training.skipped == [f"hypothesis {unknown}: no demonstration for this kind of preference yet"]


def test_every_style_holds_out_other_situations_than_it_trains_on():
    for style in STYLES:
        trained = {d.prompt for d in style.train} | {d.reply for d in style.train}
        assert not trained & ({d.prompt for d in style.probes} | {d.reply for d in style.probes}), style.name
        assert all(d.contrast and d.contrast != d.reply for d in style.train + style.probes), style.name


@pytest.mark.parametrize("text, style", [
    ("Use metric units from now on, please.", "metric_units"), ("Shorter answers, please.", "short_answers"),
    ("No emojis in your answers, ever. Never.", "no_emojis"), ("Always use British spelling.", "british_spelling"),
    ("Can you give me this in metric?", None), ("I'm a bit short on time today, so let's be quick", None),
    ("I like my coffee short and strong.", None), ("Never mind.", None)])
def test_a_standing_instruction_is_one_meant_for_every_answer(text, style):
    found = standing_instruction(text)
    assert (found.name if found else None) == style


def test_standing_instructions_kept_regenerations_and_rated_replies_with_their_exclusions(db):
    metric, _ = say_standing_instructions(db)
    secret = add_episode(db, "Never use emojis from now on.", "Okay.", metadata={"incognito": True})
    gone = add_episode(db, "Always use British spelling.", "Okay.")
    trash_episode(db, gone)
    session = create_session(db, "old")
    in_trashed_session = add_episode(db, "Always give numbered steps.", "Okay.", session_id=session)
    trash_session(db, session)
    kept = add_episode(db, "Suggest a weekend plan.", "A long walk and a quiet evening.")
    replace_reply(db, kept, "A long walk, a picnic, and an early night with a good book.", "stop", rejected=True)
    replace_reply(db, kept, "A long walk and a film.", "stop", rejected=True)
    vetoed = add_episode(db, "Name a film.", "Casablanca.")
    replace_reply(db, vetoed, "Amélie.", "stop")  # re-answered without a memory: nothing rejected about style
    disliked = add_episode(db, "Tell me a joke.", "Knock knock.")
    replace_reply(db, disliked, "Why did the chicken...", "stop", rejected=True)
    db.execute("UPDATE episodes SET rating = -1 WHERE id = ?", (disliked,))
    good = [add_episode(db, f"Question {n}?", f"Answer number {n}.") for n in range(4)]
    db.execute(f"UPDATE episodes SET rating = 1 WHERE id IN ({','.join('?' * 4)})", good)
    training = build_training_set(db)
    assert sorted(training.styles) == ["metric_units", "short_answers"]
    assert set(training.episode_ids) == {metric, _, kept, *good}
    assert {secret, gone, in_trashed_session, vetoed, disliked}.isdisjoint(training.episode_ids)
    [pair] = [p for p in training.pairs if p["messages"][-1]["content"] == "Suggest a weekend plan."]
    assert (pair["chosen"], pair["rejected"]) == ("A long walk and a film.",
                                                  "A long walk, a picnic, and an early night with a good book.")
    replies = [p for p in training.probes if p.kind == "reply"]
    assert [p.item_id for p in replies] == [good[3]]  # one in four rated replies is held out, whole
    trained = [ex["messages"][-1]["content"] for ex in training.examples]
    assert "Answer number 3." not in trained and "Answer number 0." in trained
    assert "A long walk and a film." in trained
    metadata = json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (vetoed,)))
    assert metadata.get("rejected_replies") is None


def test_a_trashed_fact_still_keeps_a_reply_that_restates_it_out(db):
    tea = add_memory(db, "The user drinks green tea.", subject="user", relation="drink", object="green tea")
    trash_memory(db, tea)
    rated = add_episode(db, "What should I drink?", "Green tea, as always.")
    db.execute("UPDATE episodes SET rating = 1 WHERE id = ?", (rated,))
    assert build_training_set(db).examples == []


def test_the_first_hour_store_is_below_the_floor_and_says_why(db):
    first_hour_store(db)
    training = build_training_set(db)
    assert training.size == 1  # only the general answer: the others restate the user's facts
    reason = readiness(training.size, len(training.probes))
    assert "not enough to learn how you like answers yet: 1 example (at least 4)" in reason
    say_standing_instructions(db)
    training = build_training_set(db)
    assert training.size == 9 and readiness(training.size, len(training.probes)) == ""


def test_the_recipe_grows_with_the_data_and_never_over_trains_a_small_store():
    small = recipe_for(MIN_EXAMPLES)
    assert (small.steps, small.batch_size, small.rank, small.num_layers) == (2, 4, 4, 4)
    assert small.learning_rate == pytest.approx(5e-4) and small.objective == "sft"
    first_hour = recipe_for(9, pairs=8)
    assert first_hour.steps == 5 and first_hour.objective == "orpo" and first_hour.eval_every == 1
    medium, large = recipe_for(100), recipe_for(5000, pairs=1)
    assert medium.steps == 50 and medium.rank == 8 and medium.learning_rate == pytest.approx(5e-4 * 0.4)
    assert large.steps == 200 and large.rank == 16 and large.learning_rate == pytest.approx(1e-4)
    assert large.objective == "sft" and large.eval_every == 50
    rates = [recipe_for(n).learning_rate for n in (4, 16, 64, 256, 1024)]
    assert rates == sorted(rates, reverse=True)
    with pytest.raises(ValueError):
        recipe_for(0)


def test_style_of_reads_the_kind_of_a_claim():
    assert style_of("The user wants temperatures in Celsius.").name == "metric_units"
    assert style_of("Prefers a warm, informal tone.").name == "informal_tone"
    assert style_of("Lives in Berlin.") is None
