"""A reply stopped because the model went round in a loop is kept (and shown) without the loop
(core.loop_trim): what it said once, not the same lines thirty times over."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.loop_trim import without_loop
from tests.test_repetition import RAMBLE


def test_lines_said_again_are_dropped_and_what_was_new_is_kept_in_order():
    kept = without_loop(RAMBLE + "Your")
    assert kept.splitlines() == [
        "You forgot to include the 'm5' in the question.", "Your sister Ana plays the violin.",
        "Remembering something you didn't tell me, it's not an mistake.", "You forgot to add the 'm5' in the question.",
        "Sisters can play many instruments including violins, but it's not a specific instrument.",
        "Remembering your own brother.", "Remembering your own brother's favorite music.",
        "Your sister Ana's favorite musical instrument.", "Remembering your own sister Ana's favorite music.",
        "Your own sister Ana's favorite musical instrument.",
        "Remembering your own sister Ana's favorite musical instrument."]  # and the cut-off "Your" goes too


def test_a_phrase_said_over_and_over_within_a_line_is_said_once():
    assert without_loop("Alejandro," + " a Venezia," * 40) == "Alejandro, a Venezia"
    assert without_loop("E também não. " * 30 + "E tam") == "E também não."


def test_a_reply_with_no_loop_in_it_comes_back_as_it_was():
    reply = "Here is your week:\n\n- Monday: swim\n- Tuesday: rest\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert without_loop(reply) == reply
    assert without_loop("") == ""
    assert without_loop("Hmm... well, ok!!! 111 222") == "Hmm... well, ok!!! 111 222"


def test_a_long_run_of_cut_off_lines_at_the_end_all_go():
    # Each line that only begins one before it is dropped; checking each against all before it was quadratic.
    whole = [f"a{n:05d}x" for n in range(12_307)]
    cut_off = [f"a{n:05d}" for n in range(12_307)]
    assert without_loop("\n".join(whole + cut_off)) == "\n".join(whole)
    assert without_loop("\n".join(whole + cut_off[::-1])) == "\n".join(whole)


def test_a_copy_of_a_line_is_not_cut_off_but_the_start_of_a_longer_one_is():
    assert without_loop("12\n1\n1\n1") == "12"
    assert without_loop("1\n1\n1") == "1\n1\n1"
    assert without_loop("ab\nab\n\n") == "ab"


@given(st.text(max_size=300))
def test_any_text_gives_shorter_or_equal_text_and_a_second_pass_changes_nothing(text):
    once = without_loop(text)
    assert len(once) <= len(text) and without_loop(once) == once


def test_the_turn_keeps_a_looping_reply_without_its_loop(db, embedder, clock):
    from core.assistant import Assistant
    from core.config import Settings
    from core.store.episodes import get_episode
    from tests.fakes import ScriptedChatModel
    chat = ScriptedChatModel([RAMBLE + "Your"], finish="repetition")
    reply = Assistant(db, embedder, chat, None, Settings(), clock).reply(None, "What instrument does my sister play?")
    assert reply.finish_reason == "repetition"
    assert reply.text == without_loop(RAMBLE + "Your") == get_episode(db, reply.record.episode_id).assistant_text


def test_the_chat_shows_a_looping_reply_without_its_loop(qtbot, tmp_path, embedder):
    pytest.importorskip("pytestqt")
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _scripted_window, _typed_and_sent
    with _scripted_window(qtbot, tmp_path, ScriptedChatModel([RAMBLE], finish="repetition"), embedder) as window:
        reply = _typed_and_sent(qtbot, window.show_panel("chat"), "What instrument does my sister play?")
        assert reply.text == without_loop(RAMBLE) and reply.text.count("You forgot to add") == 1
        assert "repeating itself" in reply.status.text()
