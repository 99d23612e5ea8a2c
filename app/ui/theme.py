"""The look of the window: light and dark palettes, a spacing and a type scale, semantic colours, and the Theme that
applies them app-wide (Fusion style + a complete QPalette + one small style sheet) and follows the system's scheme.

Other panels never hard-code a colour: they read the palette, or `colors()` for meanings (ok / warn / bad / accent /
muted), which picks the light or dark variant from the palette it is given. Every text colour here reads at WCAG AA
(contrast ≥ 4.5) on the palette's Base and Window colours; tests/test_gui_theme.py checks it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication, QToolTip

APPEARANCES = ("system", "light", "dark")  # Settings.appearance: follow the OS, or always one scheme
APPEARANCE_LABELS = {"system": "System", "light": "Light", "dark": "Dark"}
STYLE = "Fusion"  # draws every widget from the palette alone, the same on macOS and Linux


@dataclass(frozen=True)
class Spacing:
    """The one spacing scale (pixels): margins and gaps are one of these, never an odd number."""
    xs: int = 4
    s: int = 8
    m: int = 12
    l: int = 16  # noqa: E741 — the scale's usual name
    xl: int = 24


@dataclass(frozen=True)
class TypeScale:
    """Named text sizes, in points relative to the platform's body font (13 pt on a Mac, 9-10 on Linux)."""
    caption: float = -1.5
    body: float = 0.0
    subtitle: float = 1.5
    title: float = 4.0
    display: float = 8.0


SPACING = Spacing()
TYPE = TypeScale()
WEIGHTS = {"caption": QFont.Weight.Normal, "body": QFont.Weight.Normal, "subtitle": QFont.Weight.DemiBold,
           "title": QFont.Weight.DemiBold, "display": QFont.Weight.Bold}


def font(role: str, base: QFont | None = None) -> QFont:
    """The app font at one of TYPE's named sizes (caption, body, subtitle, title, display), with its weight."""
    result = QFont(base if base is not None else QApplication.font())
    size = result.pointSizeF() if result.pointSizeF() > 0 else 10.0
    result.setPointSizeF(max(6.0, size + getattr(TYPE, role)))
    result.setWeight(WEIGHTS[role])
    return result


@dataclass(frozen=True)
class Scheme:
    """One scheme's colours (hex): the palette's roles and the semantic colours built from them."""
    name: str
    window: str
    base: str
    alternate: str
    text: str
    muted: str  # placeholder text, secondary labels
    button: str
    light: str
    midlight: str
    mid: str
    dark: str
    shadow: str
    highlight: str
    highlighted_text: str
    link: str
    link_visited: str
    tooltip_base: str
    tooltip_text: str
    disabled_text: str
    sidebar: str
    accent: str
    ok: str
    warn: str
    bad: str


LIGHT = Scheme(
    name="light", window="#f3f3f5", base="#ffffff", alternate="#f6f6f8", text="#1d1d1f", muted="#6a6a70",
    button="#f8f8fa", light="#ffffff", midlight="#e6e6ea", mid="#c4c4ca", dark="#8e8e94", shadow="#6a6a70",
    highlight="#1f63c6", highlighted_text="#ffffff", link="#0b5cc2", link_visited="#6c3fb8",
    tooltip_base="#fdfdfd", tooltip_text="#1d1d1f", disabled_text="#9a9aa0", sidebar="#e9e9ed",
    accent="#1f63c6", ok="#1c7a34", warn="#98580a", bad="#c0282d")

DARK = Scheme(
    name="dark", window="#1f1f22", base="#2a2a2d", alternate="#303034", text="#ececef", muted="#a4a4ab",
    button="#37373b", light="#4a4a4f", midlight="#3f3f44", mid="#56565c", dark="#141416", shadow="#000000",
    highlight="#2e6fcf", highlighted_text="#ffffff", link="#72b4ff", link_visited="#bba2ff",
    tooltip_base="#3a3a3e", tooltip_text="#ececef", disabled_text="#75757c", sidebar="#19191b",
    accent="#6aaeff", ok="#5cc97a", warn="#e8a94a", bad="#ff7a73")

SCHEMES = {"light": LIGHT, "dark": DARK}


def build_palette(scheme: Scheme) -> QPalette:
    """A complete palette: every role in the Active, Inactive and Disabled groups, so no widget falls back to a
    colour from the other scheme (tables, text views, inputs, links, tooltips, disabled text)."""
    pal = QPalette()
    c = QColor
    Role, Group = QPalette.ColorRole, QPalette.ColorGroup
    roles = {
        Role.Window: scheme.window, Role.WindowText: scheme.text, Role.Base: scheme.base,
        Role.AlternateBase: scheme.alternate, Role.Text: scheme.text, Role.BrightText: "#ffffff",
        Role.Button: scheme.button, Role.ButtonText: scheme.text, Role.Light: scheme.light,
        Role.Midlight: scheme.midlight, Role.Mid: scheme.mid, Role.Dark: scheme.dark,
        Role.Shadow: scheme.shadow, Role.Highlight: scheme.highlight,
        Role.HighlightedText: scheme.highlighted_text, Role.Link: scheme.link,
        Role.LinkVisited: scheme.link_visited, Role.ToolTipBase: scheme.tooltip_base,
        Role.ToolTipText: scheme.tooltip_text, Role.PlaceholderText: scheme.muted,
        Role.Accent: scheme.accent,
    }
    for group in (Group.Active, Group.Inactive, Group.Disabled):
        for role, value in roles.items():
            pal.setColor(group, role, c(value))
    for role in (Role.WindowText, Role.Text, Role.ButtonText, Role.HighlightedText, Role.PlaceholderText):
        pal.setColor(Group.Disabled, role, c(scheme.disabled_text))
    pal.setColor(Group.Disabled, Role.Highlight, c(scheme.mid))
    return pal


@dataclass(frozen=True)
class Colors:
    """Colours by meaning, for the scheme a palette is in. Each reads as text on `background` (WCAG AA)."""
    dark: bool
    text: QColor
    muted: QColor
    background: QColor  # the palette's Base: lists, tables, text views
    surface: QColor  # the palette's Window: behind panels and forms
    accent: QColor
    ok: QColor
    warn: QColor
    bad: QColor

    def tint(self, color: QColor, alpha: float = 0.16) -> QColor:
        """`color` at `alpha` over the background: a pill's or a badge's fill behind text in `color`."""
        mixed = QColor(color)
        mixed.setAlphaF(alpha)
        return mixed


def is_dark_palette(pal: QPalette) -> bool:
    return pal.color(QPalette.ColorRole.Window).lightnessF() < 0.5


def colors(pal: QPalette | None = None) -> Colors:
    """The semantic colours for `pal` (default: the application's palette), light or dark to match it."""
    if pal is None:
        pal = QApplication.palette() if QApplication.instance() is not None else QPalette()
    dark = is_dark_palette(pal)
    scheme = DARK if dark else LIGHT
    role = QPalette.ColorRole
    return Colors(dark=dark, text=pal.color(role.Text), muted=pal.color(role.PlaceholderText),
                  background=pal.color(role.Base), surface=pal.color(role.Window),
                  accent=QColor(scheme.accent), ok=QColor(scheme.ok), warn=QColor(scheme.warn), bad=QColor(scheme.bad))


def relative_luminance(color: QColor) -> float:
    """WCAG 2.x relative luminance of an sRGB colour."""
    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(color.redF()) + 0.7152 * channel(color.greenF()) + 0.0722 * channel(color.blueF())


def contrast_ratio(first: QColor, second: QColor) -> float:
    """WCAG contrast ratio, 1 to 21; body text needs 4.5."""
    high, low = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def resolve_scheme(appearance: str, system: Qt.ColorScheme) -> str:
    """'light' or 'dark': the user's choice, or under 'system' what the OS says (Unknown, as offscreen: light)."""
    if appearance in SCHEMES:
        return appearance
    return "dark" if system == Qt.ColorScheme.Dark else "light"


def style_sheet(scheme: Scheme, base: QFont) -> str:
    """The one small application style sheet: the sidebar and opt-in headings (QLabel[role="title"] …).
    Everything else is drawn by Fusion from the palette."""
    sp = SPACING
    sizes = {role: font(role, base).pointSizeF() for role in ("caption", "subtitle", "title", "display")}
    hover = QColor(scheme.text)
    hover.setAlphaF(0.08)
    hover_rgba = f"rgba({hover.red()}, {hover.green()}, {hover.blue()}, {hover.alphaF():.2f})"
    return f"""
QWidget#sidebarPane {{ background: {scheme.sidebar}; border-right: 1px solid {scheme.mid}; }}
QLabel#sidebarTitle {{ font-size: {sizes['title']:.1f}pt; font-weight: 600; color: {scheme.text};
    padding: {sp.m}px {sp.m}px {sp.s}px {sp.m}px; }}
QListWidget#sidebar {{ background: transparent; border: none; outline: none; padding: 0 {sp.s}px; }}
QListWidget#sidebar::item {{ color: {scheme.text}; padding: {sp.s - 2}px {sp.s}px; margin: 1px 0;
    border-radius: 6px; }}
QListWidget#sidebar::item:hover:!selected {{ background: {hover_rgba}; }}
QListWidget#sidebar::item:selected {{ background: {scheme.highlight}; color: {scheme.highlighted_text}; }}
QGroupBox {{ font-size: {sizes['subtitle']:.1f}pt; font-weight: 600; }}
QLabel[role="caption"] {{ font-size: {sizes['caption']:.1f}pt; color: {scheme.muted}; }}
QLabel[role="subtitle"] {{ font-size: {sizes['subtitle']:.1f}pt; font-weight: 600; }}
QLabel[role="title"] {{ font-size: {sizes['title']:.1f}pt; font-weight: 600; }}
QLabel[role="display"] {{ font-size: {sizes['display']:.1f}pt; font-weight: 700; }}
QToolTip {{ background: {scheme.tooltip_base}; color: {scheme.tooltip_text}; border: 1px solid {scheme.mid};
    padding: {sp.xs}px; }}
"""


def native_dialogs_follow_scheme(platform: str) -> bool:
    """Whether the platform's own file dialogs match the app's light or dark scheme. On a Mac the native panel
    follows the appearance the app tells the system (Theme._tell_platform), and Mac users expect it; elsewhere a
    GTK or portal dialog stays light in a dark Engram, so Qt's own dialogs are used: they follow the palette."""
    return platform == "darwin"


class Theme(QObject):
    """Applies an appearance to the whole application and keeps it applied: under 'system' it follows the OS's
    light/dark switch live (QStyleHints.colorSchemeChanged, macOS and the Linux desktops that report one)."""
    changed = Signal(str)  # the scheme now in force: 'light' or 'dark'

    def __init__(self, app: Any, appearance: str = "system", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app = app
        self.appearance = appearance if appearance in APPEARANCES else "system"
        self.scheme = ""
        self.base_font = QFont(app.font())  # the type scale is relative to the platform's own body font
        app.styleHints().colorSchemeChanged.connect(self._system_changed)
        native = native_dialogs_follow_scheme(sys.platform)
        app.setAttribute(Qt.ApplicationAttribute.AA_DontUseNativeDialogs, not native)
        self.apply()

    def set_appearance(self, appearance: str) -> None:
        self.appearance = appearance if appearance in APPEARANCES else "system"
        self.apply()

    def system_scheme(self) -> Qt.ColorScheme:
        return self.app.styleHints().colorScheme()

    def apply(self, scheme_name: str | None = None) -> str:
        """Put the palette and style sheet of the current appearance (or of `scheme_name`, for screenshots) in
        force; returns the scheme. Nothing is redone when the scheme is already in force."""
        self._tell_platform()
        name = scheme_name or resolve_scheme(self.appearance, self.system_scheme())
        if name == self.scheme:
            return name
        scheme = SCHEMES[name]
        if self.app.style().name().lower() != STYLE.lower():
            self.app.setStyle(STYLE)
        palette = build_palette(scheme)
        self.app.setPalette(palette)
        QToolTip.setPalette(palette)
        sheet = style_sheet(scheme, self.base_font)
        if self.app.styleSheet() != sheet:  # re-polishes every widget (~0.1 s): not when a new window finds it set
            self.app.setStyleSheet(sheet)
        self.scheme = name
        self.changed.emit(name)
        return name

    def _tell_platform(self) -> None:
        """An explicit choice also goes to the platform (Qt 6.8+), so macOS draws the title bar to match."""
        hints = self.app.styleHints()
        if not hasattr(hints, "setColorScheme"):
            return
        wanted = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark}.get(self.appearance)
        if wanted is None:
            hints.unsetColorScheme()
        elif hints.colorScheme() != wanted:
            hints.setColorScheme(wanted)

    def _system_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.appearance == "system":
            self.apply()
