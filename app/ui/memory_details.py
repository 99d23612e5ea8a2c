"""The Memories panel's detail pane: the fact, its validity, what replaced it, every change and where it came from."""
from __future__ import annotations

import html
from typing import Any

from app.ui.memory_table import importance_text, when
from core.types import Episode

FLAG_KEYS = ("pinned", "protected", "permanent", "critical")


def details_html(details: Any, sources: dict[int, Episode]) -> str:
    m = details.memory
    rows = [f"<h3>{html.escape(m.statement)}</h3>",
            f"<p><b>#{m.id}</b> · {m.kind} · {m.status} · confidence {m.confidence:.2f} · importance "
            f"{importance_text(m)}</p>"]
    if m.subject or m.relation or m.object:
        rows.append(f"<p>({html.escape(m.subject)}, {html.escape(m.relation)}, {html.escape(m.object)})</p>")
    rows.append(f"<p>Valid from {when(m.valid_from)} to {when(m.valid_to) if m.valid_to else 'now'}</p>")
    if m.superseded_by:
        rows.append(f"<p>Replaced by memory #{m.superseded_by}</p>")
    if details.entities:
        rows.append("<p>Entities: " + ", ".join(html.escape(f"{n} ({r})") for n, r in details.entities) + "</p>")
    rows.append("<h4>History</h4><ul>")
    for entry in details.history:
        change = _change_text(entry.old_value, entry.new_value)
        reason = f" — {html.escape(entry.reason)}" if entry.reason else ""
        rows.append(f"<li>{when(entry.at)} <b>{entry.action}</b>{change}{reason}</li>")
    rows.append("</ul><h4>Source conversations</h4><ul>")
    for episode_id in m.source_episode_ids:
        episode = sources.get(episode_id)
        text = html.escape(episode.user_text[:300]) if episode else "(purged)"
        rows.append(f"<li>#{episode_id} {when(episode.created_at) if episode else ''}: {text}</li>")
    rows.append("</ul>")
    return "".join(rows)


def _change_text(old: dict | None, new: dict | None) -> str:
    if not old or not new:
        return ""
    changed = [k for k in new if old.get(k) != new.get(k)]
    parts = [f"{k.replace('_', ' ')}: {_value_text(k, old.get(k))} → {_value_text(k, new.get(k))}"
             for k in changed[:4]]
    return (" (" + "; ".join(parts) + ")") if parts else ""


def _value_text(key: str, value: Any) -> str:
    """A history value as a person reads it: dates as dates, flags as yes / no, nothing as a dash."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool) or key in FLAG_KEYS:
        return "yes" if value else "no"
    if (key.endswith("_at") or key in ("valid_from", "valid_to")) and isinstance(value, (int, float)):
        return html.escape(when(value))
    if isinstance(value, float):
        return f"{value:.2f}"
    return html.escape(str(value))
