"""A chat template's render with a deadline.

A template comes inside the model file, from anyone, and jinja2's sandbox bounds what a template may touch, not
how long it runs: two nested loops of 100,000 steps each pass every size check and would hang the chat for hours.
A Python thread cannot be stopped from outside, so the render stops itself: while it runs, a trace function on
this thread watches only the template's own compiled code (jinja2 compiles it under the file name
"<template>", for Engram's tokenizer and for transformers' alike) and raises once the deadline has passed.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, TypeVar

TEMPLATE_FILE = "<template>"  # the file name jinja2 compiles a template from a string under
RENDER_SECONDS = 5.0  # a real template renders a long conversation in milliseconds

T = TypeVar("T")


class TemplateTooSlow(Exception):
    """The template was still running at its deadline."""


def within_deadline(render: Callable[[], T], seconds: float = RENDER_SECONDS, *,
                    clock: Callable[[], float] = time.monotonic) -> T:
    """render() on this thread, stopped with TemplateTooSlow if template code still runs `seconds` later."""
    deadline = clock() + seconds
    stopped: list[bool] = []  # once: jinja2 runs lines "in the template" again to rewrite the traceback

    def on_line(frame: Any, event: str, arg: Any) -> Any:
        if stopped:
            return None
        if clock() > deadline:
            stopped.append(True)
            raise TemplateTooSlow(f"it did not finish within {seconds:g} s")
        return on_line

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        # only the template's own code is traced (~1 µs a line); the code it calls runs untraced
        return on_line if frame.f_code.co_filename == TEMPLATE_FILE and not stopped else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return render()
    finally:
        sys.settrace(previous)
