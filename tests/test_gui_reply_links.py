"""A link in a reply is model output, and model output is data: a click opens only a web or mail link, never a
file, an app or another scheme a hostile memory or pasted page could have steered the model into writing."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QUrl  # noqa: E402

from app.ui.chat_widgets import MarkdownView, opens_from_a_reply  # noqa: E402


@pytest.mark.parametrize("url, opens", [
    ("https://example.com/recipe", True),
    ("http://example.com", True),
    ("mailto:ana@example.com", True),
    ("file:///Applications/Calculator.app", False),
    ("file:///etc/passwd", False),
    ("/Users/me/Downloads/run.command", False),
    ("smb://evil.example/share", False),
    ("x-apple.systempreferences:com.apple.preference.security", False),
    ("javascript:alert(1)", False),
    ("vscode://file/etc/hosts", False),
    ("", False),
])
def test_only_web_and_mail_links_open(url, opens):
    assert opens_from_a_reply(QUrl(url)) is opens


def test_clicking_a_link_in_a_reply_opens_only_a_safe_one(qtbot):
    view = MarkdownView()
    qtbot.addWidget(view)
    opened = []
    view.open_url = opened.append  # the system's opener, replaced in tests
    view.setMarkdown("[recipe](https://example.com/r) and [click me](file:///Applications/Calculator.app)")
    assert not view.openExternalLinks() and not view.openLinks()  # Qt itself opens nothing
    view.anchorClicked.emit(QUrl("file:///Applications/Calculator.app"))
    view.anchorClicked.emit(QUrl("https://example.com/r"))
    assert [u.toString() for u in opened] == ["https://example.com/r"]
    assert view.toPlainText().startswith("recipe and click me")  # the page stays where it was
