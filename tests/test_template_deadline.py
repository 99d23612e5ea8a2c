"""models.template_deadline stops a chat template's render at its deadline, and only the template's code is
watched. A clock that moves on each time it is read drives it here."""
from __future__ import annotations

import itertools
import sys

import pytest

from models.template_sandbox import compile_template
from models.template_deadline import TemplateTooSlow, within_deadline


def _ticking(step: float):
    counter = itertools.count()
    return lambda: next(counter) * step


def test_a_template_that_runs_past_its_deadline_stops_and_the_trace_is_put_back():
    template = compile_template("{% for i in range(100000) %}{{ i }}{% endfor %}")
    before = sys.gettrace()
    with pytest.raises(TemplateTooSlow, match="did not finish within 2 s"):
        within_deadline(lambda: template.render(), 2.0, clock=_ticking(0.001))
    assert sys.gettrace() is before


def test_a_quick_template_renders_as_it_would_without_a_deadline():
    template = compile_template("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}")
    messages = [{"role": "user", "content": f"message {n}"} for n in range(50)]
    assert within_deadline(lambda: template.render(messages=messages), 2.0, clock=_ticking(0.001)) == \
        template.render(messages=messages)


def test_code_outside_the_template_is_not_watched():
    def python_loop() -> int:  # a long loop in ordinary code: no line of it reads the clock
        return sum(range(100_000))
    reads = []
    clock = _ticking(0.0)
    assert within_deadline(python_loop, 1.0, clock=lambda: reads.append(1) or clock()) == sum(range(100_000))
    assert len(reads) == 1  # the deadline, taken once
