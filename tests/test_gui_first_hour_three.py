"""Issue 38, third round: the chat controls LM Studio and Jan users look for, clicked and typed through the window.

A model's own sampling (from its generation config, changed in Models), editing a sent message with the earlier
branch kept, highlighted code blocks with Copy, and dark file dialogs. Replies stream from the real tiny MLX model
where the engine's use of a setting is what is tested; elsewhere from a scripted chat model.
"""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QDialogButtonBox, QFileDialog  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.model_sampling import MODEL_SETTINGS_FILENAME  # noqa: E402
from tests.guikit import on_db_lane, type_and_send  # noqa: E402
from tests.fakes import ScriptedStructuredModel  # noqa: E402

TURN_MS = 180_000  # a whole turn on the tiny model, loaded from its folder on the first one


def _nothing_learned() -> ScriptedStructuredModel:
    return ScriptedStructuredModel({"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})


def _type_and_send(qtbot, panel, text: str):
    return type_and_send(qtbot, panel, text, TURN_MS)


def _retype(qtbot, box, text: str) -> None:
    """Select what the spin box shows and type over it, as a person does."""
    qtbot.mouseClick(box, Qt.LeftButton)
    box.selectAll()
    qtbot.keyClicks(box, text)


def _click_row(qtbot, table, repo_id: str) -> None:
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).data(Qt.UserRole) == repo_id)
    rect = table.visualItemRect(table.item(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=rect.center())


@pytest.fixture
def sampled_model(tmp_path, tiny_model_dir):
    """The tiny model with a generation config of its own, as Hugging Face models ship one."""
    folder = tmp_path / "tiny-with-config"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.3, "top_p": 0.85, "max_new_tokens": 200}), encoding="utf-8")
    return folder


def test_a_models_own_sampling_is_shown_changed_in_models_and_used_by_the_engine(qtbot, tmp_path, embedder,
                                                                                 sampled_model, monkeypatch):
    import mlx_lm.sample_utils as sample_utils
    samplers = []
    real_sampler = sample_utils.make_sampler
    monkeypatch.setattr(sample_utils, "make_sampler",
                        lambda **kw: samplers.append(kw) or real_sampler(**kw))  # what the engine asks MLX for
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder = embedder
    services.structured_model = _nothing_learned
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    models = window.show_panel("models")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(sampled_model)))
    with qtbot.waitSignal(models.added, timeout=60000) as added:
        qtbot.mouseClick(models.buttons["add"], Qt.LeftButton)
    assert added.args == [True], models.message.text()
    repo_id = services.settings.chat_model
    qtbot.waitUntil(lambda: repo_id in models.installed, timeout=20000)
    _click_row(qtbot, models.table, repo_id)
    qtbot.mouseClick(models.buttons["settings"], Qt.LeftButton)
    dialog = models.settings_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    assert dialog.values() == {"temperature": 0.3, "top_p": 0.85, "max_tokens": 200, "context_tokens": 2048}
    assert dialog.findChild(type(dialog.problem), "default_temperature").text() == "The model's default: 0.3"

    _retype(qtbot, dialog.boxes["temperature"], "0")
    _retype(qtbot, dialog.boxes["max_tokens"], "5")
    _retype(qtbot, dialog.boxes["context_tokens"], "1024")
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.Save), Qt.LeftButton)
    assert not dialog.isVisible() and "Saved" in models.message.text()
    kept = json.loads((services.data_dir / MODEL_SETTINGS_FILENAME).read_text())
    assert kept == {repo_id: {"temperature": 0.0, "max_tokens": 5, "context_tokens": 1024}}  # top-p: the default

    chat = window.show_panel("chat")
    qtbot.waitUntil(lambda: not chat.banner.isVisible(), timeout=20000)
    reply = _type_and_send(qtbot, chat, "Tell me a long story about the sea")
    engine = services.chat_engine()
    assert engine.context_window == 1024  # the context length the user chose
    assert 0 < len(engine.last_reply_tokens) <= 5  # the longest reply the user chose
    assert samplers[-1]["temp"] == 0.0  # greedy, as set
    assert reply.status.text() == "Stopped at the length limit."

    # back to the model's defaults: the file forgets the model, the next reply samples at its 0.3
    _click_row(qtbot, models.table, repo_id)
    window.show_panel("models")
    qtbot.mouseClick(models.buttons["settings"], Qt.LeftButton)
    dialog = models.settings_dialog
    qtbot.mouseClick(dialog.reset_button, Qt.LeftButton)
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.Save), Qt.LeftButton)
    assert json.loads((services.data_dir / MODEL_SETTINGS_FILENAME).read_text()) == {}
    window.show_panel("chat")
    _type_and_send(qtbot, chat, "And another")
    assert samplers[-1] == {"temp": 0.3, "top_p": 0.85} and engine.context_window == 2048
    chat.shutdown()
    window.runner.shutdown(wait=True)
    services.close()


def _scripted_window(qtbot, tmp_path, embedder, replies):
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel(replies)
    window = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    window.services.structured_model = _nothing_learned
    return window, chat


def _close(window) -> None:
    window.panels["chat"].shutdown()
    window.runner.shutdown(wait=True)
    window.services.close()


def _shown(panel) -> list[str]:
    return [m.body.toPlainText().strip() for m in panel.message_widgets()]


def test_an_edited_message_is_answered_again_and_the_earlier_branch_stays_one_click_away(qtbot, tmp_path, embedder):
    window, chat = _scripted_window(qtbot, tmp_path, embedder, lambda messages: f"Answer to: {messages[-1].content}")
    panel = window.show_panel("chat")
    _type_and_send(qtbot, panel, "I practise scales")
    _type_and_send(qtbot, panel, "Which key should I start in?")
    asked = panel.message_widgets()[2]
    assert asked.controls.edit_button.isVisibleTo(asked) and not asked.controls.older_button.isVisibleTo(asked)

    qtbot.mouseClick(asked.controls.edit_button, Qt.LeftButton)
    assert asked.controls.editor.toPlainText() == "Which key should I start in?"
    qtbot.keyClicks(asked.controls.editor, "Which minor key should I start in?")  # typed over the selected text
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS):
        qtbot.mouseClick(asked.controls.send_button, Qt.LeftButton)
    assert _shown(panel) == ["I practise scales", "Answer to: I practise scales",
                             "Which minor key should I start in?", "Answer to: Which minor key should I start in?"]
    assert [m.content for m in chat.calls[-1] if m.role == "user"] == ["I practise scales",
                                                                       "Which minor key should I start in?"]
    qtbot.waitUntil(lambda: asked.controls.version_count.text() == "2/2", timeout=10000)
    assert asked.controls.older_button.isVisibleTo(asked) and asked.controls.older_button.isEnabled()

    qtbot.mouseClick(asked.controls.older_button, Qt.LeftButton)  # the first version, with its reply
    qtbot.waitUntil(lambda: "Which key should I start in?" in _shown(panel), timeout=10000)
    assert _shown(panel)[2:] == ["Which key should I start in?", "Answer to: Which key should I start in?"]
    first = panel.message_widgets()[2]
    assert first.controls.version_count.text() == "1/2" and not first.controls.older_button.isEnabled()
    qtbot.mouseClick(first.controls.newer_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: "Which minor key should I start in?" in _shown(panel), timeout=10000)

    session_id = panel.session_id  # reopened, the conversation shows the branch last chosen
    qtbot.mouseClick(panel.sessions.new_button, Qt.LeftButton)
    panel.sessions.select(session_id)
    panel.open_session(session_id)
    qtbot.waitUntil(lambda: len(panel.message_widgets()) == 4, timeout=10000)
    assert panel.message_widgets()[2].controls.version_count.text() == "2/2"
    assert on_db_lane(window, lambda db: db.scalar("SELECT count(*) FROM episodes")) == 3  # every turn kept
    _close(window)


def test_a_code_block_is_highlighted_in_light_and_dark_and_copied_with_one_click(qtbot, tmp_path, embedder):
    from PySide6.QtGui import QGuiApplication
    window, _chat = _scripted_window(qtbot, tmp_path, embedder, [
        "Try this:\n\n```python\nfor note in range(4):  # each string\n    print(\"scale\")\n```\n\nfor plain words"])
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "Give me a drill in code")

    def colour_of(word: str) -> str:
        """The colour the highlighter gives the word's first letter (none: the text's own)."""
        found = reply.body.document().find(word)
        assert not found.isNull(), word
        block = found.block()
        at = found.selectionStart() - block.position()
        return next((r.format.foreground().color().name() for r in block.layout().formats()
                     if r.start <= at < r.start + r.length), "")
    window.theme.apply("light")
    qtbot.waitUntil(lambda: colour_of("for note") == "#7b2fa8", timeout=5000)  # a keyword in the code block
    assert colour_of("\"scale\"") == "#1f7a1f" and colour_of("# each") == "#6f6f6f"
    assert colour_of("for plain") != "#7b2fa8"  # the same word outside the code block is left alone
    window.theme.apply("dark")
    qtbot.waitUntil(lambda: colour_of("for note") == "#d59cff", timeout=5000)  # the dark scheme's own colours
    QGuiApplication.clipboard().setText("")
    link = reply.body.document().find("Copy code")
    link.setPosition(link.selectionStart() + 2)
    qtbot.mouseClick(reply.body.viewport(), Qt.LeftButton, pos=reply.body.cursorRect(link).center())
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text().startswith("for note in range(4)"), timeout=5000)
    _close(window)


def test_file_dialogs_are_dark_in_dark_mode_and_native_on_a_mac(qtbot, tmp_path):
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import native_dialogs_follow_scheme
    assert native_dialogs_follow_scheme("darwin") and not native_dialogs_follow_scheme("linux")
    window = MainWindow(Services.from_data_dir(tmp_path / "home"))
    qtbot.addWidget(window)
    window.show()
    app = QApplication.instance()
    assert app.testAttribute(Qt.AA_DontUseNativeDialogs)  # on Linux: Qt's own dialog, which follows the palette
    shown = []

    def look(dialog) -> None:  # what "Add a model…" opens, read while it is open
        shown.append(dialog.palette().color(QPalette.Window).lightness())
        dialog.reject()
    for scheme in ("dark", "light"):
        window.theme.apply(scheme)
        dialog = QFileDialog(window, "Add a model: choose a folder of MLX weights")
        dialog.setFileMode(QFileDialog.Directory)
        qtbot.addWidget(dialog)
        dialog.open()
        qtbot.waitUntil(dialog.isVisible, timeout=5000)
        look(dialog)
    assert shown[0] < 90 < 170 < shown[1]  # dark in dark mode, light in light mode
    window.runner.shutdown(wait=True)
    window.services.close()
