"""The jinja2 environment a chat template runs in: transformers' sandbox, with every way to make a large value
bounded.

A template comes inside the model file, from anyone. jinja2's sandbox keeps it from Python's internals and bounds
`range`; it does not bound size: `"a" | center(10**10)`, `s | replace("a", s)`, `[s] * 10**6 | join`, a string
doubled forty times (`{% set s = s ~ s %}`, a macro calling itself, a namespace in a loop) or a loop writing a
large string a million times each build gigabytes in one call, where no deadline can stop them
(models.template_deadline stops a template that runs long). So every place a template makes a value checks its
size first — operators (a number squared in a loop too), concatenation (`~`), filters (adding up lists copies
each one), method and macro calls, and the rendered output — and refuses in words (SecurityError) past a bound no
real chat template comes near: a prompt is some thousands of words, rendered within the model's context window.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Callable, Iterable

MAX_ITEMS = 1_000_000  # the longest string or list a template may build by repetition
MAX_TEXT = 10_000_000  # characters (or items) of any value it makes, its output included
MAX_NUMBER_ARGUMENT = 100_000  # a width, count or size handed to a filter or method (jinja2's own bound on range)
MAX_INTEGER_BITS = 4096  # a product of whole numbers
MAX_PRODUCT = 100 * MAX_TEXT  # two arguments' sizes multiplied: what a call could write from them in one go
# Calls whose result size _predicted gives, or that never return more than their subject: no product rule
MEASURED_EXACTLY = frozenset({
    "|join", ".join", "|replace", ".replace", "|indent", "|wordwrap", ".expandtabs", "|format", ".format",
    ".format_map", "|tojson", "|sum", "|trim", ".strip", ".lstrip", ".rstrip", ".split", ".rsplit", ".partition",
    ".rpartition", ".startswith", ".endswith", ".find", ".rfind", ".index", ".rindex", ".count", ".removeprefix",
    ".removesuffix"})
_PERCENT_SPEC = re.compile(r"%[-+ #0]*(\d*)(?:\.(\d*))?[a-zA-Z%]")
_BRACE_SPEC = re.compile(r"\{[^{}]*:([^{}]*)\}")


def compile_template(source: str) -> Any:
    """A chat template compiled in the environment transformers gives it, with every size bounded."""
    import jinja2
    environment = _environment()
    template = environment.from_string(source)
    # `~` compiles to these two, taken from jinja2.runtime into the template's own module: bounded there
    names = template.root_render_func.__globals__
    names["str_join"] = _bounded_join(names.get("str_join", jinja2.runtime.str_join))
    names["markup_join"] = _bounded_join(names.get("markup_join", jinja2.runtime.markup_join))
    return template


def _environment() -> Any:
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # `{% generation %}…{% endgeneration %}` marks the assistant's part: kept as is
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller: Any) -> str:
            return caller()

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+", "%"})
        sizes: Sizes
        concat = staticmethod(_bounded_concat)  # the output, and every macro's and block's

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            problem = binop_problem(operator, left, right, self.sizes)
            if problem:
                raise _too_large(problem)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's
            name = "." + getattr(__obj, "__name__", "call")
            bound_to = getattr(__obj, "__self__", None)
            data = ((bound_to,) if isinstance(bound_to, (str, list, tuple, dict)) else ()) + args
            checked(name, data, kwargs, __self.sizes, pairwise=not isinstance(__obj, jinja2.runtime.Macro))
            return checked_result(name, super().call(__context, __obj, *args, **kwargs), __self.sizes)

    env = Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.sizes = Sizes()
    env.filters["tojson"] = _tojson
    env.filters = {name: _guarded(name, f, env.sizes) for name, f in env.filters.items()}
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def _raise_exception(message: str) -> None:
    import jinja2
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _too_large(what: str) -> Exception:
    from jinja2.exceptions import SecurityError
    return SecurityError(f"the chat template computes something too large ({what})")


def binop_problem(operator: str, left: Any, right: Any, sizes: "Sizes") -> str:
    """Why `left operator right` would be too large, or ''."""
    if operator == "**":
        small = not (isinstance(left, int) and isinstance(right, int)) or right < 0 or (
            abs(left) <= 1 or right * max(abs(left), 2).bit_length() <= 64)
        return "" if small else "**"
    if operator == "+":
        sized = isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple))
        return "+" if sized and len(left) + len(right) > MAX_TEXT else ""
    if operator == "%":
        return "%" if isinstance(left, str) and formatted_size(left, right, sizes) > MAX_TEXT else ""
    if isinstance(left, int) and isinstance(right, int):  # squaring in a loop doubles the digits each time
        return "*" if left.bit_length() + right.bit_length() > MAX_INTEGER_BITS else ""
    sized, times = (left, right) if isinstance(right, int) else (right, left)
    if isinstance(sized, (str, list, tuple)) and isinstance(times, int) and len(sized) * times > MAX_ITEMS:
        return "*"
    return ""


class Sizes:
    """deep_size, remembered for the last containers measured: a template asks about the same conversation in
    every turn of its loop (`messages | length`), and walking it each time made a render 10× slower. The sandbox
    lets a template change no list or dict, so a size stays true; the containers are held, so no id is reused."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._known: dict[int, tuple[Any, int]] = {}

    def of(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value)
        if not isinstance(value, (list, tuple, dict)):
            return deep_size(value)
        known = self._known.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        size = deep_size(value)
        if len(self._known) >= self.keep:
            self._known.pop(next(iter(self._known)))
        self._known[id(value)] = (value, size)
        return size


def deep_size(value: Any, limit: int = MAX_TEXT) -> int:
    """Characters and items in `value` and everything it holds, counted until past `limit`."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, Mapping):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += len(item)
            stack.extend(item)
        else:
            total += 1
    return total


def formatted_size(fmt: str, values: Any, sizes: "Sizes") -> int:
    """An upper bound on the length of `fmt` formatted with `values` (% or str.format): every width and
    precision the format names may pad a value to its size."""
    numbers = [int(n) for spec in _PERCENT_SPEC.findall(fmt) for n in spec if n]
    numbers += [int(n) for spec in _BRACE_SPEC.findall(fmt) for n in re.findall(r"\d+", spec)]
    return len(fmt) + sum(numbers) + sizes.of(values)


def checked(name: str, args: Iterable[Any], kwargs: Mapping[str, Any], sizes: "Sizes", *,
            pairwise: bool = True) -> None:
    """Refuse a call whose arguments, or whose result by its arguments, are too large. `name`: "|filter" or
    ".method". `pairwise`: also refuse a call on a string whose size times another argument's passes MAX_PRODUCT —
    the shape of every call that writes an argument into the string once per character or line (not for a macro,
    which only passes its arguments on)."""
    values = [a for a in args if not _is_jinja_state(a)] + list(kwargs.values())
    measured = []
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > MAX_NUMBER_ARGUMENT:
                raise _too_large(f"{name}({value})")
            measured.append(abs(value))
        else:
            measured.append(sizes.of(value))
    if sum(measured) > MAX_TEXT or _predicted(name, values, kwargs, sizes) > MAX_TEXT:
        raise _too_large(name)
    if pairwise and name not in MEASURED_EXACTLY and values and isinstance(values[0], str) and len(measured) > 1 \
            and measured[0] * max(measured[1:]) > MAX_PRODUCT:
        raise _too_large(name)


def checked_result(name: str, result: Any, sizes: "Sizes") -> Any:
    if sizes.of(result) > MAX_TEXT:
        raise _too_large(name)
    return result


def _predicted(name: str, values: list[Any], kwargs: Mapping[str, Any], sizes: "Sizes") -> int:
    """The size some calls reach from small arguments: replacing, joining, indenting, wrapping, expanding tabs,
    formatting, writing JSON."""
    first: Any
    first, rest = (values[0], values[1:]) if values else (None, [])
    if name == "|join":  # (items, separator)
        separator = rest[0] if rest else kwargs.get("d", "")
        return sizes.of(first) + len(str(separator)) * (len(first) if hasattr(first, "__len__") else 0)
    if name == "|sum" and not isinstance(kwargs.get("start", rest[1] if len(rest) > 1 else 0), (int, float)):
        return sizes.of(first) * (len(first) if hasattr(first, "__len__") else 1)  # lists added: each one copied
    if name == "|tojson":
        indent = kwargs.get("indent", rest[1] if len(rest) > 1 else None) or 0
        return sizes.of(first) * (2 + (len(indent) if isinstance(indent, str) else int(indent)))
    if not isinstance(first, str):
        return 0
    if name == ".join" and rest:  # separator.join(items)
        return sizes.of(rest[0]) + len(first) * (len(rest[0]) if hasattr(rest[0], "__len__") else 0)
    if name in ("|replace", ".replace") and len(rest) >= 2 and all(isinstance(v, str) for v in rest[:2]):
        old, new = rest[0], rest[1]
        count = first.count(old) if old else len(first) + 1
        return len(first) + count * max(0, len(new) - len(old))
    if name == "|indent":
        width = rest[0] if rest else kwargs.get("width", 4)
        return len(first) + (len(width) if isinstance(width, str) else int(width)) * (first.count("\n") + 1)
    if name == "|wordwrap":
        width = int(rest[0] if rest else kwargs.get("width", 79)) or 1
        wrap = kwargs.get("wrapstring", rest[2] if len(rest) > 2 else None) or "\n"
        return len(first) + len(wrap) * (len(first) // max(width, 1) + first.count("\n") + 1)
    if name == ".expandtabs":
        return len(first) + int(rest[0] if rest else kwargs.get("tabsize", 8)) * first.count("\t")
    if name in ("|format", ".format", ".format_map"):
        return formatted_size(first, [*rest, *kwargs.values()], sizes)
    return 0


def _is_jinja_state(value: Any) -> bool:
    """The context, eval context or environment a filter may ask for: not data."""
    return isinstance(value, _jinja_state_types())


@functools.cache
def _jinja_state_types() -> tuple[type, ...]:
    from jinja2.environment import Environment
    from jinja2.nodes import EvalContext
    from jinja2.runtime import Context
    return Context, EvalContext, Environment


def _guarded(name: str, function: Callable[..., Any], sizes: "Sizes") -> Callable[..., Any]:
    @functools.wraps(function)  # keeps jinja2's pass_context / pass_eval_context marks
    def guarded(*args: Any, **kwargs: Any) -> Any:
        checked("|" + name, args, kwargs, sizes)
        return checked_result("|" + name, function(*args, **kwargs), sizes)
    return guarded


def _bounded_join(join: Callable[[Iterable[Any]], Any]) -> Callable[[Iterable[Any]], Any]:
    def bounded(parts: Iterable[Any]) -> Any:
        parts = list(parts)
        if sum(len(p) if isinstance(p, str) else deep_size(p) for p in parts) > MAX_TEXT:
            raise _too_large("~")
        return join(parts)
    return bounded


def _bounded_concat(pieces: Iterable[Any]) -> str:
    kept, size = [], 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_TEXT:
            raise _too_large("output")
        kept.append(piece)
    return "".join(kept)
