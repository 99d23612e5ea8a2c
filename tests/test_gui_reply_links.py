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


def test_a_reply_loads_no_image_or_file_it_names(qtbot):
    """`![x](/dev/zero)` in a reply made the view read /dev/zero for ever when it painted (the window hung, its
    memory grew); a reply shows text, and no file, image or other resource a model named is read."""
    from PySide6.QtGui import QTextDocument
    view = MarkdownView()
    qtbot.addWidget(view)
    for url in ("/dev/zero", "file:///dev/urandom", "file:///etc/passwd", "https://example.com/pixel.png"):
        loaded = view.loadResource(QTextDocument.ImageResource, QUrl(url))
        assert loaded is not None and not loaded  # something empty: Qt would read the file itself for None


def test_painting_a_reply_that_names_dev_zero_finishes(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "paint.py"
    script.write_text(
        "from PySide6.QtWidgets import QApplication\napp = QApplication([])\n"
        "from app.ui.chat_widgets import MarkdownView\nv = MarkdownView()\nv.resize(400, 200)\n"
        "v.setMarkdown('hi ![x](/dev/zero) <img src=\"file:///dev/urandom\"> there')\nv.show()\nv.grab()\n"
        "app.processEvents()\nprint('painted')\n")
    from pathlib import Path
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1], env={**__import__("os").environ,
                                                                         "QT_QPA_PLATFORM": "offscreen"})
    assert done.stdout.strip() == "painted", done.stderr[-500:]


def test_markup_in_a_reply_is_shown_as_the_text_it_is(qtbot):
    view = MarkdownView()
    qtbot.addWidget(view)
    view.setMarkdown("Use **bold** here, and the <b>tag</b> or <img src='/dev/zero'> as written.")
    assert view.toPlainText() == "Use bold here, and the <b>tag</b> or <img src='/dev/zero'> as written."
    assert "font-weight:700" in view.toHtml()  # Markdown still renders


def test_a_label_never_renders_what_it_is_given_as_markup(qtbot):
    """Titles, statements and errors are data: the window's labels (and tooltips, message boxes) show them plain."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    from app.ui.plain_text import guard_plain_text
    guard_plain_text()
    label = QLabel('<b>x</b> <img src="/dev/zero">')
    qtbot.addWidget(label)
    label.sizeHint()  # with the markup rendered, this read /dev/zero for ever
    assert label.textFormat() == Qt.PlainText
    ours = QLabel("<p>Our own <b>words</b></p>")
    ours.setTextFormat(Qt.RichText)
    qtbot.addWidget(ours)
    ours.show()
    assert ours.textFormat() == Qt.RichText  # markup we wrote on purpose stays rich

