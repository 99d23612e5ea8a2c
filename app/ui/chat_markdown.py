"""A reply's text: GitHub Markdown without raw HTML, as tall as its text, links that open only in the browser or the
mail app, nothing a reply names ever read from disk, fenced code highlighted (app.ui.code_highlight) with a
"Copy code" link under each block."""
from __future__ import annotations

import re
from typing import Any, Callable

from PySide6.QtCore import QByteArray, QEvent, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QTextDocument, QTextOption
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from app.ui.code_highlight import CodeHighlighter

# A reply's links are model output: only these open, in the browser or the mail app. A file, an app, a share or
# another app's scheme ("file:///Applications/…", "smb://", "x-apple.systempreferences:") a hostile memory or a
# pasted page could have steered the model into writing is never opened by a click.
SAFE_LINK_SCHEMES = ("http", "https", "mailto")
MARKDOWN_WITHOUT_HTML = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
                         | QTextDocument.MarkdownFeature.MarkdownNoHTML)


COPY_SCHEME = "engram-copy"  # the "Copy code" link Engram puts under each code block of a reply
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def with_copy_links(text: str) -> tuple[str, list[str]]:
    """The reply's Markdown with a "Copy code" link after each closed fenced block, and the blocks' code. A link a
    model writes with this scheme can only copy a block of the same reply: nothing else is done with it."""
    blocks: list[str] = []

    def linked(found: re.Match) -> str:
        blocks.append(found.group(2).rstrip("\n"))
        return f"{found.group(0)}\n\n[Copy code]({COPY_SCHEME}:{len(blocks) - 1})\n"
    return _FENCE.sub(linked, text), blocks


def opens_from_a_reply(url: QUrl) -> bool:
    return url.isValid() and url.scheme().lower() in SAFE_LINK_SCHEMES and bool(url.host() or url.path())


class MarkdownView(QTextBrowser):
    """A read-only Markdown view as tall as its text, so replies stack in a scroll area."""

    def __init__(self) -> None:
        super().__init__()
        self.open_url: Callable[[QUrl], Any] = QDesktopServices.openUrl  # replaced in tests
        self.code_blocks: list[str] = []  # a reply's code, for its "Copy code" links
        self.setOpenLinks(False)  # a click neither navigates this view nor opens anything by itself
        self.anchorClicked.connect(self._clicked)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.viewport().setAutoFillBackground(False)
        self.highlighter = CodeHighlighter(self.document(), self.palette())  # fenced code, coloured per scheme

    def changeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # light and dark have their own code colours
            self.highlighter.set_palette(self.palette())

    def setMarkdown(self, text: str) -> None:  # noqa: N802 - Qt's name
        """GitHub Markdown without raw HTML: "<b>", "<img …>" in a reply are shown as the text they are."""
        self.document().setMarkdown(text, MARKDOWN_WITHOUT_HTML)

    def _clicked(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            index = int(url.path()) if url.path().isdigit() else -1
            if 0 <= index < len(self.code_blocks):
                QGuiApplication.clipboard().setText(self.code_blocks[index])
            return
        if opens_from_a_reply(url):
            self.open_url(url)

    def loadResource(self, kind: int, url: QUrl | str) -> Any:
        """Nothing a reply names is read: `![x](/dev/zero)` hung the window reading for ever, and a local image
        or file has no place in a reply (an image shows as the empty box Qt draws for a missing one). Not None:
        QTextDocument reads the file itself when the view returns nothing."""
        return QByteArray()

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self, *_: Any) -> None:
        self.document().setTextWidth(self.viewport().width())
        height = int(self.document().size().height()) + 6
        if height != self.height():
            self.setFixedHeight(height)
