"""Code blocks in a reply, highlighted: keywords, strings, comments and numbers of the common languages, in colours
that read on the light and the dark scheme alike (chosen by the palette the reply is drawn with).

Qt's Markdown reader marks each line of a fenced block with the fence's language (QTextFormat.BlockCodeLanguage);
a block without one is highlighted with the rules most languages share. Each line is read on its own (a string or
comment running over lines shows as plain text after its first line): a reply is short, and this never misleads
more than plain text would.
"""
from __future__ import annotations

import re
from typing import Any

from PySide6.QtGui import QColor, QFont, QPalette, QSyntaxHighlighter, QTextCharFormat, QTextFormat

_C_LIKE = ("if else for while do switch case break continue return function var let const class new this "
           "import export from try catch finally throw typeof instanceof null true false void static public "
           "private protected struct enum interface extends implements package int long float double char bool "
           "boolean string auto namespace using template typename fn let mut impl trait pub use mod match self "
           "Self where async await yield go func defer chan map range type nil def end")
KEYWORDS = {
    "python": "and as assert async await break class continue def del elif else except False finally for from "
              "global if import in is lambda None nonlocal not or pass raise return True try while with yield "
              "self print",
    "shell": "if then else elif fi for in do done while case esac function return export local echo cd sudo",
    "sql": "select from where insert into values update set delete create table index drop alter join left right "
           "inner outer on group by order having limit and or not null as distinct primary key",
}
ALIASES = {"py": "python", "python3": "python", "sh": "shell", "bash": "shell", "zsh": "shell", "console": "shell",
           "shell-session": "shell", "sqlite": "sql", "postgresql": "sql", "mysql": "sql"}
HASH_COMMENTS = {"python", "shell", "ruby", "rb", "yaml", "yml", "toml", "r", "perl", "makefile", "dockerfile"}
DASH_COMMENTS = {"sql", "lua", "haskell"}
# (light scheme, dark scheme): each pair keeps about the same contrast against its background
COLOURS = {"keyword": ("#7b2fa8", "#d59cff"), "string": ("#1f7a1f", "#8fd98f"), "comment": ("#6f6f6f", "#9a9a9a"),
           "number": ("#a65d00", "#f0b060")}
_STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`")
_NUMBER = re.compile(r"\b(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)\b")


def language_of(name: str) -> str:
    name = name.strip().lower()
    return ALIASES.get(name, name)


def keywords_of(language: str) -> frozenset[str]:
    return frozenset((KEYWORDS.get(language) or _C_LIKE).split())


def comment_start(language: str) -> re.Pattern:
    if language in HASH_COMMENTS:
        return re.compile(r"#")
    if language in DASH_COMMENTS:
        return re.compile(r"--")
    if language in ("", "text", "plaintext"):
        return re.compile(r"(?!x)x")  # none: a plain block may hold anything
    return re.compile(r"//|/\*")


def spans(line: str, language: str) -> list[tuple[int, int, str]]:
    """(start, length, kind) of what to colour on one line of code: strings and comments first (a keyword inside
    them stays their colour), then keywords and numbers outside them."""
    taken: list[tuple[int, int, str]] = []
    comment = comment_start(language)
    position = 0
    while position < len(line):
        string, remark = _STRING.search(line, position), comment.search(line, position)
        if remark is not None and (string is None or remark.start() < string.start()):
            taken.append((remark.start(), len(line) - remark.start(), "comment"))
            break
        if string is None:
            break
        taken.append((string.start(), string.end() - string.start(), "string"))
        position = string.end()
    case_blind = language == "sql"
    words = keywords_of(language)
    for found in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", line):
        word = found.group(0).lower() if case_blind else found.group(0)
        if word in words and not _inside(found.start(), taken):
            taken.append((found.start(), len(found.group(0)), "keyword"))
    for found in _NUMBER.finditer(line):
        if not _inside(found.start(), taken):
            taken.append((found.start(), found.end() - found.start(), "number"))
    return sorted(taken)


def _inside(at: int, taken: list[tuple[int, int, str]]) -> bool:
    return any(start <= at < start + length for start, length, kind in taken if kind in ("string", "comment"))


class CodeHighlighter(QSyntaxHighlighter):
    """Colours the fenced code lines of a reply's document; other lines are left alone."""

    def __init__(self, document: Any, palette: QPalette) -> None:
        super().__init__(document)
        self.formats: dict[str, QTextCharFormat] = {}
        self.set_palette(palette)

    def set_palette(self, palette: QPalette) -> None:
        """The scheme's colours: the dark column on a dark background."""
        dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
        self.formats = {}
        for kind, (light_colour, dark_colour) in COLOURS.items():
            form = QTextCharFormat()
            form.setForeground(QColor(dark_colour if dark else light_colour))
            if kind == "keyword":
                form.setFontWeight(QFont.Weight.DemiBold)
            if kind == "comment":
                form.setFontItalic(True)
            self.formats[kind] = form
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt's name
        block_format = self.currentBlock().blockFormat()
        if not block_format.hasProperty(QTextFormat.Property.BlockCodeFence):
            return
        language = language_of(block_format.stringProperty(QTextFormat.Property.BlockCodeLanguage))
        for start, length, kind in spans(text, language):
            self.setFormat(start, length, self.formats[kind])
