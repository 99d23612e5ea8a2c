"""Light and dark mode (issue 14): Settings → Appearance switches the whole window's palette, text stays readable
(WCAG contrast ≥ 4.5) in both schemes, 'System' follows the OS's scheme live, and the sidebar's icons come from
one SVG set tinted to the palette."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QColor, QPalette  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui import theme  # noqa: E402
from app.ui.icons import ICON_NAMES, svg_text, tinted_pixmap  # noqa: E402
from app.ui.main_window import PANELS  # noqa: E402
from core.config import SETTINGS_FILENAME, Settings, load_settings  # noqa: E402

TEXT_ROLES = ((QPalette.Text, QPalette.Base), (QPalette.WindowText, QPalette.Window),
              (QPalette.ButtonText, QPalette.Button), (QPalette.HighlightedText, QPalette.Highlight),
              (QPalette.ToolTipText, QPalette.ToolTipBase), (QPalette.PlaceholderText, QPalette.Base),
              (QPalette.Link, QPalette.Base), (QPalette.LinkVisited, QPalette.Base),
              (QPalette.Text, QPalette.AlternateBase))


def _contrast(widget, text_role, background_role) -> float:
    pal = widget.palette()
    return theme.contrast_ratio(pal.color(text_role), pal.color(background_role))


@pytest.fixture
def light_window(window):
    window.theme.set_appearance("light")
    yield window
    window.theme.set_appearance("light")  # the next test's window starts from the default light scheme


def test_contrast_ratio_is_wcags():
    assert theme.contrast_ratio(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert theme.contrast_ratio(QColor("#777777"), QColor("#ffffff")) == pytest.approx(4.48, abs=0.01)
    assert theme.contrast_ratio(QColor("#123456"), QColor("#123456")) == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_text_colour_reads_on_its_background(qapp, name):
    pal = theme.build_palette(theme.SCHEMES[name])
    for text_role, background_role in TEXT_ROLES:
        ratio = theme.contrast_ratio(pal.color(text_role), pal.color(background_role))
        assert ratio >= 4.5, (name, text_role, background_role, ratio)
    semantic = theme.colors(pal)
    assert semantic.dark == (name == "dark")
    for field in ("muted", "accent", "ok", "warn", "bad"):
        for background in (semantic.background, semantic.surface):
            assert theme.contrast_ratio(getattr(semantic, field), background) >= 4.5, (name, field)
    disabled = theme.contrast_ratio(pal.color(QPalette.Disabled, QPalette.Text), pal.color(QPalette.Disabled,
                                                                                            QPalette.Base))
    assert 1.8 <= disabled < theme.contrast_ratio(pal.color(QPalette.Text), pal.color(QPalette.Base))


def test_system_means_what_the_os_says_and_unknown_is_light():
    assert theme.resolve_scheme("system", Qt.ColorScheme.Dark) == "dark"
    assert theme.resolve_scheme("system", Qt.ColorScheme.Light) == "light"
    assert theme.resolve_scheme("system", Qt.ColorScheme.Unknown) == "light"
    assert theme.resolve_scheme("dark", Qt.ColorScheme.Light) == "dark"
    assert theme.resolve_scheme("light", Qt.ColorScheme.Dark) == "light"
    assert Settings().appearance == "system" and Settings.from_dict({"appearance": "dark"}).appearance == "dark"


def test_choosing_dark_in_settings_turns_the_window_dark_and_is_saved(qtbot, light_window):
    window = light_window
    data_dir = window.services.data_dir
    before = (data_dir / SETTINGS_FILENAME).read_text(encoding="utf-8") if (data_dir / SETTINGS_FILENAME).exists() \
        else "{}"
    memories = window.show_panel("memories")
    table = memories.table
    light_base = table.palette().color(QPalette.Base)
    assert not theme.is_dark_palette(window.palette())
    assert _contrast(table, QPalette.Text, QPalette.Base) >= 4.5
    settings = window.show_panel("settings")
    assert [settings.appearance.itemText(i) for i in range(settings.appearance.count())] == ["System", "Light", "Dark"]
    settings.appearance.setCurrentIndex(settings.appearance.findText("Dark"))  # as a click in the list does
    qtbot.waitUntil(lambda: theme.is_dark_palette(window.palette()), timeout=5000)
    assert window.theme.scheme == "dark"
    assert table.palette().color(QPalette.Base) != light_base
    assert theme.is_dark_palette(table.palette())
    for widget in (table, settings.appearance, window.sidebar):
        assert _contrast(widget, QPalette.Text, QPalette.Base) >= 4.5
        assert _contrast(widget, QPalette.WindowText, QPalette.Window) >= 4.5
    saved = json.loads((data_dir / SETTINGS_FILENAME).read_text(encoding="utf-8"))
    assert saved == {**json.loads(before), "appearance": "dark"}  # the one field, merged into the file
    assert load_settings(data_dir).appearance == "dark" and window.services.settings.appearance == "dark"
    settings.appearance.setCurrentIndex(settings.appearance.findText("Light"))
    qtbot.waitUntil(lambda: not theme.is_dark_palette(window.palette()), timeout=5000)
    assert _contrast(table, QPalette.Text, QPalette.Base) >= 4.5


def test_an_appearance_set_outside_the_app_is_followed(qtbot, light_window):
    window = light_window
    window.apply_settings(window.services.settings.replace(appearance="dark"))  # as the settings watcher does
    assert window.theme.scheme == "dark" and theme.is_dark_palette(QApplication.instance().palette())
    settings = window.show_panel("settings")
    assert settings.appearance.currentText() == "Dark"


def test_system_follows_the_os_switch_live(qtbot, light_window, monkeypatch):
    window = light_window
    reported = {"scheme": Qt.ColorScheme.Light}
    monkeypatch.setattr(window.theme, "system_scheme", lambda: reported["scheme"])
    window.theme.set_appearance("system")
    assert window.theme.scheme == "light"
    reported["scheme"] = Qt.ColorScheme.Dark
    QApplication.instance().styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)  # what macOS sends
    assert window.theme.scheme == "dark" and theme.is_dark_palette(window.palette())
    window.theme.set_appearance("light")
    QApplication.instance().styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert window.theme.scheme == "light"  # an explicit choice is not overridden by the OS


def test_sidebar_icons_are_one_tinted_set(qtbot, light_window):
    window = light_window
    assert [spec.key for spec in PANELS] == list(ICON_NAMES)
    for row in range(window.sidebar.count()):
        assert not window.sidebar.item(row).icon().isNull()
    for name in ICON_NAMES:
        svg = svg_text(name)
        assert "currentColor" in svg and "#" not in svg  # monochrome: the one colour is substituted
    light = _ink(tinted_pixmap(svg_text("chat"), QColor("#1d1d1f"), 24))
    white = _ink(tinted_pixmap(svg_text("chat"), QColor("#ffffff"), 24))
    assert light and white and max(c.lightness() for c in light) < 60 and min(c.lightness() for c in white) > 200
    light_icon = window.sidebar.item(0).icon().pixmap(24).toImage()
    window.theme.set_appearance("dark")
    dark_icon = window.sidebar.item(0).icon().pixmap(24).toImage()
    assert _mean_lightness(dark_icon) > _mean_lightness(light_icon) + 100  # re-tinted to the dark palette's text


def test_type_scale_orders_the_named_sizes(qapp):
    sizes = [theme.font(role).pointSizeF() for role in ("caption", "body", "subtitle", "title", "display")]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert theme.SPACING.xs < theme.SPACING.s < theme.SPACING.m < theme.SPACING.l < theme.SPACING.xl


def _ink(pixmap) -> list[QColor]:
    image = pixmap.toImage()
    return [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())
            if image.pixelColor(x, y).alpha() > 250]


def _mean_lightness(image) -> float:
    inked = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())
             if image.pixelColor(x, y).alpha() > 250]
    return sum(c.lightness() for c in inked) / max(1, len(inked))



def test_the_welcome_screens_fit_pill_is_redrawn_in_the_new_scheme(qtbot, light_window):
    from app.ui.fit_pill import pill_colours
    dialog = light_window.show_onboarding()
    dialog.finished.disconnect()  # closing it here is not the user dismissing it
    qtbot.waitUntil(lambda: "Recommended for" in dialog.model.text(), timeout=60000)
    light_text = dialog.model.text()
    light_window.theme.set_appearance("dark")
    qtbot.waitUntil(lambda: dialog.model.text() != light_text, timeout=5000)
    verdict = next(v for v in ("fits", "tight", "too big", "won't fit") if f"&nbsp;{v}&nbsp;" in light_text)
    _text, fill = pill_colours(verdict, QApplication.instance().palette())
    assert fill.name() in dialog.model.text() and fill.name() not in light_text
    dialog.hide()


def test_headings_take_the_type_scales_size(qtbot, light_window):
    from app.ui.panel_widgets import heading
    jobs = light_window.show_panel("jobs")
    title = jobs.loss_title
    title.ensurePolished()
    body = QApplication.font().pointSizeF()
    assert title.property("role") == "subtitle" and title.font().pointSizeF() > body
    assert title.font().weight() >= 600
    display = heading("Welcome", "display")
    qtbot.addWidget(display)
    display.ensurePolished()
    assert display.font().pointSizeF() > title.font().pointSizeF()
