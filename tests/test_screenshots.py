"""`engram --screenshots DIR` on a seeded sample folder writes one non-empty PNG per panel; the sample folder
is built through the real store APIs and embedder, and refuses to overwrite a store."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.__main__ import main  # noqa: E402
from app.ui.screenshots import FIRST_START, SCHEMES  # noqa: E402
from app.services.sample_data import build_sample_data  # noqa: E402
from app.ui.main_window import PANELS, available_panels  # noqa: E402
from core.errors import InvalidInput  # noqa: E402
from core.finetune import adapters as versions  # noqa: E402
from core.memory import forget  # noqa: E402
from core.store import hypotheses  # noqa: E402
from core.store import jobs as job_store  # noqa: E402
from core.store.db import open_db  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sample(tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("sample") / "data"
    summary = build_sample_data(folder, embedder)
    return folder, summary


def test_sample_folder_holds_a_realistic_store(sample):
    folder, summary = sample
    assert summary.memories >= 15 and summary.episodes >= 10 and summary.forgotten >= 1
    db = open_db(folder / "engram.db")
    try:
        boston = db.query_one("SELECT * FROM memories WHERE statement = 'User lives in Boston'")
        assert boston["invalidated_at"] is not None and boston["superseded_by"] is not None
        assert db.scalar("SELECT count(*) FROM memory_vec") >= summary.memories - summary.forgotten
        assert {h.status for h in hypotheses.list_hypotheses(db)} == {"open", "confirmed", "rejected"}
        assert all("below" in e.reason for e in forget.list_events(db))
        assert {j.state for j in job_store.list_jobs(db)} == {"done", "queued"}
        assert versions.active_adapter(db) is not None
        assert db.scalar("SELECT count(*) FROM edges WHERE kind = 'hebbian'") >= 5
        assert db.scalar("SELECT count(*) FROM reply_memories") == 10  # chips under the sample replies
        practice = db.scalar("SELECT id FROM sessions WHERE title = 'Practice plan'")
        assert db.scalar("SELECT count(*) FROM episodes WHERE session_id = ?", (practice,)) == 3
        assert db.scalar("SELECT count(*) FROM episodes WHERE session_id = ? AND "
                         "json_extract(metadata, '$.off_path') = 1", (practice,)) == 1  # an edited message's first
    finally:
        db.close()
    with pytest.raises(InvalidInput):
        build_sample_data(folder, None)  # never over an existing store


def test_screenshots_writes_one_png_per_panel_light_and_dark(qtbot, sample, tmp_path, capsys, monkeypatch):
    folder, _ = sample
    from app.ui import screenshots
    # 38 fixed settles of 0.6 s were 23 of the test's 26 s; each panel's first read is still awaited by its signal,
    # and at 0.1 s 18 of the 20 pictures came out byte-identical to 0.6 s ones (the timeline's two: 3-4 pixels)
    monkeypatch.setattr(screenshots, "SETTLE_SECONDS", 0.1)
    out = tmp_path / "shots"
    settings = (folder / "settings.json").read_text(encoding="utf-8")
    assert main(["--screenshots", str(out), "--data-dir", str(folder)]) == 0
    files = sorted(out.glob("*.png"))
    assert len(available_panels()) == len(PANELS) == 8
    keys = [spec.key for spec in PANELS]
    extra = {"chat": ["chat-controls"], "memories": ["memories-about"], "models": ["model-settings"]}
    names = [name for key in keys for name in [key, *extra.get(key, [])]] + [FIRST_START]
    expected = [f"{name}{suffix}" for _scheme, suffix in SCHEMES for name in names]
    assert sorted(p.stem for p in files) == sorted(expected) and len(expected) == 24
    for path in files:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, path
    assert capsys.readouterr().out.split() == [str(out / f"{stem}.png") for stem in expected]
    assert (out / "memories-about.png").read_bytes() != (out / "memories.png").read_bytes()  # another view
    assert (out / "chat-controls.png").read_bytes() != (out / "chat.png").read_bytes()  # the reply's pace, learning
    for name in names:  # each dark picture is mostly dark, its light twin mostly light
        assert _mean_lightness(out / f"{name}-dark.png") < 90 < 170 < _mean_lightness(out / f"{name}.png"), name
    assert (folder / "settings.json").read_text(encoding="utf-8") == settings  # the picture marks nothing as seen


def _mean_lightness(path) -> float:
    from PySide6.QtGui import QImage
    image = QImage(str(path)).scaled(64, 40)  # enough to tell a dark picture from a light one
    pixels = [image.pixelColor(x, y).lightness() for x in range(image.width()) for y in range(image.height())]
    return sum(pixels) / len(pixels)


def test_without_a_data_folder_a_throwaway_sample_is_built_and_removed(qtbot, tmp_path, embedder, monkeypatch):
    """Where the pictures come from; the pictures themselves are the test above's (20 of them take ~25 s)."""
    from app.ui import screenshots
    seen = []

    def shoot(_app, services, out_dir, _embedder):
        seen.append((services.data_dir, services.db.scalar("SELECT count(*) FROM memories")))
        services.close()
        return []

    monkeypatch.setattr(screenshots, "_shoot", shoot)
    assert screenshots.take_screenshots(tmp_path / "shots", embedder=embedder) == []
    (folder, memories), = seen
    assert memories >= 15 and folder.name == "data"  # shot from a seeded sample…
    assert not folder.parent.exists()  # …that is gone afterwards
