"""Issue 39 §2: Settings' switch serves the memory from the window — off by default; on, the `openai` client library,
unchanged, chats through a real socket on 127.0.0.1 with the memory recalled and the access logged; the switch is a
setting a restarted window follows; off again, the port refuses the connection. Real store, real MiniLM, the tiny real
MLX model."""
from __future__ import annotations

import json
import socket
import time

import openai
import pytest

from app.services.wiring import Services
from app.ui.main_window import MainWindow
from core.clients import AccessLog, ClientRegistry
from core.config import update_settings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _window(qtbot, home, embedder, engine):
    services = Services.from_data_dir(home)
    services._embedder, services.chat = embedder, engine
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    return window


def _close(window):
    window.close()
    window.runner.shutdown(wait=True)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.slow
def test_the_switch_serves_the_memory_to_an_openai_client_and_survives_a_restart(qtbot, tmp_path, embedder,
                                                                                  tiny_engine):
    home, port = tmp_path / "home", _free_port()
    home.mkdir()
    update_settings(home, {"serve_port": port})
    token = ClientRegistry(home, time.time).grant("Cursor", "write")
    window = _window(qtbot, home, embedder, tiny_engine)
    window.services.manager(with_embedder=True).add("The user's cat is called Mochi")
    box = window.panel("settings").connected_apps
    assert not box.serve_switch.isChecked() and "Off" in box.serving.text() and _refused(port)  # off by default

    box.serve_switch.setChecked(True)
    address = f"http://127.0.0.1:{port}/v1"
    assert address in box.serving.text() and "engram clients grant NAME" in box.serving.text()  # the token hint
    client = openai.OpenAI(base_url=address, api_key=token, max_retries=0, timeout=120)
    reply = client.chat.completions.create(model="engram/tiny", max_tokens=6,
                                           messages=[{"role": "user", "content": "What is my cat called?"}])
    assert reply.choices[0].finish_reason == "stop" and isinstance(reply.choices[0].message.content, str)
    chats = [e for e in AccessLog(home, time.time).recent() if e.action == "chat"]
    assert chats and chats[0].client == "Cursor" and chats[0].count >= 1  # Mochi was recalled into the prompt
    with pytest.raises(openai.AuthenticationError):  # an app nobody granted
        openai.OpenAI(base_url=address, api_key="engram-not-a-token", max_retries=0).models.list()
    assert json.loads((home / "settings.json").read_text())["serve_api"] is True
    _close(window)
    assert _refused(port)  # the window closed: nothing listens

    window = _window(qtbot, home, embedder, tiny_engine)  # started again: it serves again, as switched
    qtbot.waitUntil(lambda: not _refused(port), timeout=10_000)
    client = openai.OpenAI(base_url=address, api_key=token, max_retries=0, timeout=120)
    assert [m.id for m in client.models.list().data] == ["engram/model"]
    box = window.panel("settings").connected_apps
    assert box.serve_switch.isChecked() and address in box.serving.text()
    box.serve_switch.setChecked(False)
    assert _refused(port) and "Off" in box.serving.text()
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
    assert json.loads((home / "settings.json").read_text())["serve_api"] is False
    _close(window)


def test_a_taken_port_is_said_and_the_switch_stays_off(qtbot, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        update_settings(home, {"serve_port": taken.getsockname()[1]})
        window = MainWindow(Services.from_data_dir(home))
        qtbot.addWidget(window)
        box = window.panel("settings").connected_apps
        box.serve_switch.setChecked(True)
        assert not box.serve_switch.isChecked() and "Could not serve on port" in box.serving.text()
        assert json.loads((home / "settings.json").read_text())["serve_api"] is False
        window.runner.shutdown(wait=True)
