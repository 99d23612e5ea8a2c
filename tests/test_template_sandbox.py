"""models.template_sandbox: a chat template (it ships inside a model file, from anyone) cannot build a large value
by any road — filters, methods, operators, `~`, macros, namespaces or its output — and the templates real models
ship render as before (tests/integration/test_chat_tokenizer.py compares them with transformers'). Each refused
case here would build 0.3–1 GB without the bounds (kept that small so a failing run cannot take the machine)."""
from __future__ import annotations

import pytest
from jinja2.exceptions import SecurityError

from models.template_sandbox import MAX_TEXT, compile_template

BIG = '"a" * 1000000'
REFUSED = {
    "a filter's width": '{{ ("a" | center(300000000)) | length }}',
    "a width inside a % format": '{{ ("%300000000s" | format("x")) | length }}',
    "a width inside str.format": '{{ "{:>300000000}".format("x") | length }}',
    "a precision inside %": '{{ ("%.300000000f" % 1) | length }}',
    "replacing each character by a long string": '{{ ((' + BIG + ') | replace("a", "a" * 300)) | length }}',
    "the method replace": '{{ (' + BIG + ').replace("a", "a" * 300) | length }}',
    "joining many references": '{{ (([' + BIG + '] * 300) | join) | length }}',
    "a long separator": '{{ ((["a"] * 1000000) | join("b" * 300)) | length }}',
    "a long separator, str.join": '{{ ("b" * 300).join(["a"] * 1000000) | length }}',
    "indenting each of half a million lines": '{{ (("a\\n" * 500000) | indent(600)) | length }}',
    "wrapping with a long wrapstring": '{{ (("a " * 500000) | wordwrap(1, wrapstring="x" * 600)) | length }}',
    "JSON of many references": '{{ (([' + BIG + '] * 300) | tojson) | length }}',
    "doubling in a namespace": ('{% set ns = namespace(s="a") %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}'
                                '{% endfor %}{{ ns.s | length }}'),
    "doubling with +": ('{% set ns = namespace(s="a") %}{% for i in range(30) %}{% set ns.s = ns.s + ns.s %}'
                        '{% endfor %}{{ ns.s | length }}'),
    "doubling line by line": "{% set s = 'a' %}" + "{% set s = s ~ s %}" * 30 + "{{ s | length }}",
    "doubling through a macro": ('{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s | length }}{% endmacro %}'
                                 '{{ f("a", 30) }}'),
    "writing a long string many times": '{% set s = ' + BIG + ' %}{% for i in range(300) %}{{ s }}{% endfor %}',
    "squaring a number": ('{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}'
                          '{% endfor %}{{ ns.n | string | length }}'),
    "adding up lists": '{{ ([[1]] * 100000) | sum(start=[]) | length }}',
    "a long string written for each link": '{{ ("http://a.b " * 90000) | urlize(rel="r" * 2000) | length }}',
    "a macro's output": ('{% macro f(s) %}{% for i in range(300) %}{{ s }}{% endfor %}{% endmacro %}'
                         '{{ f(' + BIG + ') | length }}'),
}


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_a_template_cannot_build_something_large(source):
    with pytest.raises(SecurityError, match="computes something too large"):
        compile_template(source).render(messages=[])


MESSAGES = [{"role": "system", "content": "You remember things."}, {"role": "user", "content": "x " * 100000},
            {"role": "assistant", "content": "Fine.\tYes."}]
ALLOWED = {
    '{{ "a" | center(80) }}': " " * 39 + "a" + " " * 40,
    '{{ "%5s|%-3d" | format("x", 7) }}': "    x|7  ",
    '{{ "{}: {:>4}".format("n", 42) }}': "n:   42",
    '{{ messages | map(attribute="role") | join(", ") }}': "system, user, assistant",
    '{{ messages[0] | tojson(indent=2) | length }}': "59",
    '{{ messages[1].content | replace(" ", "") | length }}': "100000",
    '{{ (messages[1].content ~ messages[1].content) | length }}': "400000",
    '{{ messages[2].content.expandtabs(4) }}': "Fine.   Yes.",
    '{{ [1, 2, 3] | sum }}{{ [[1], [2]] | sum(start=[]) }}{{ 12 * 12 }}': "6[1, 2]144",
    '{{ "a\\nb" | indent(4, true) }}': "    a\n    b",
    ('{% set ns = namespace(text="") %}{% for m in messages %}{% set ns.text = ns.text + m.role[0] %}{% endfor %}'
     '{{ ns.text }}'): "sua",
    ('{% set ns = namespace(turns=messages, more=messages[1].content) %}{{ ns.turns | length }}'
     '{{ ns.more | length }}'): "3200000",
    ('{% set c = messages[1].content %}{{ (c ~ "!").startswith(c) }} {{ (c ~ c).replace(c, "") | length }} '
     '{{ (c ~ "x").split(c) | length }}'): "True 0 2",
    '{% macro turn(m) %}<{{ m.role }}>{% endmacro %}{% for m in messages %}{{ turn(m) }}{% endfor %}':
        "<system><user><assistant>",
}


@pytest.mark.parametrize("source, rendered", ALLOWED.items())
def test_what_real_templates_do_renders_as_jinja_renders_it(source, rendered):
    assert compile_template(source).render(messages=MESSAGES) == rendered


def test_the_bound_is_far_above_a_real_prompt():
    assert MAX_TEXT >= 50 * 200_000  # a 128k-token context is some 500,000 characters
