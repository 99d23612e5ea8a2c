"""Issue 39 §2: the `openai` client library, unchanged, completes a conversation through Engram's endpoint over a real
socket — with the memory recalled into the prompt, the access logged, and an unauthorised client refused — on a real
store, the real MiniLM and the tiny real MLX model."""
from __future__ import annotations

import threading

import urllib.error
import urllib.request

import openai
import pytest

from app.serve.openai_api import ChatService, make_server
from app.services.wiring import Services
from core.clients import AccessLog, ClientRegistry
from core.memory.manage import MemoryManager
from core.store.db import open_db


@pytest.fixture
def served(tmp_path, embedder, tiny_engine):
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder, services.chat = embedder, tiny_engine
    MemoryManager(services.db, embedder).add("The user's cat is called Mochi")
    registry = ClientRegistry(services.data_dir, clock=lambda: 1_700_000_000.0)
    log = AccessLog(services.data_dir, clock=lambda: 1_700_000_000.0)
    tokens = {"reader": registry.grant("Reader"), "writer": registry.grant("Cursor", "write")}
    service = ChatService(lambda: services.assistant(), registry, log, model_id="engram/tiny").start()
    server = make_server(service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield url, tokens, log, services
    server.shutdown()
    server.server_close()
    service.close()


def _client(url, token):
    return openai.OpenAI(base_url=url, api_key=token, max_retries=0, timeout=120)


def _turns(services):
    db = open_db(services.db_path)
    try:
        return [dict(r) for r in db.query("SELECT e.user_text, s.title FROM episodes e JOIN sessions s "
                                          "ON s.id = e.session_id")]
    finally:
        db.close()


def test_an_openai_client_chats_with_memory_and_the_access_is_logged(served):
    url, tokens, log, services = served
    client = _client(url, tokens["writer"])
    assert [m.id for m in client.models.list().data] == ["engram/tiny"]
    reply = client.chat.completions.create(model="engram/tiny", max_tokens=8, messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "What is my cat called?"}])
    assert reply.choices[0].message.role == "assistant" and isinstance(reply.choices[0].message.content, str)
    chats = [e for e in log.recent() if e.action == "chat"]
    assert chats and chats[0].client == "Cursor" and chats[0].count >= 1  # Mochi was recalled into the prompt
    assert {"user_text": "What is my cat called?", "title": "Cursor (through the API)"} in _turns(services)
    pieces = list(client.chat.completions.create(model="engram/tiny", max_tokens=6, stream=True,
                                                 messages=[{"role": "user", "content": "Tell me about Mochi"}]))
    assert pieces[0].choices[0].delta.role == "assistant" and pieces[-1].choices[0].finish_reason == "stop"
    assert "Cursor chatted, recalling" in log.recent()[0].describe()


def test_a_read_only_client_recalls_but_stores_nothing(served):
    url, tokens, log, services = served
    _client(url, tokens["reader"]).chat.completions.create(
        model="engram/tiny", max_tokens=4, messages=[{"role": "user", "content": "Where is Mochi?"}])
    assert _turns(services) == []
    assert log.recent()[0].client == "Reader"


def test_unauthorised_and_malformed_requests_are_refused(served):
    url, tokens, _log, _services = served
    with pytest.raises(openai.AuthenticationError):
        _client(url, "engram-not-a-token").models.list()
    assert _status(f"{url}/models", {}) == 401  # no token at all
    with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
        _client(url, tokens["writer"]).chat.completions.create(
            model="x", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="temperature"):
        _client(url, tokens["writer"]).chat.completions.create(
            model="x", temperature=9, messages=[{"role": "user", "content": "hi"}])
    headers = {"Authorization": f"Bearer {tokens['writer']}"}
    assert _status(f"{url}/chat/completions", headers, b"x" * (2 * 1024 * 1024)) == 413
    assert _status(f"{url}/models", {**headers, "Host": "evil.example:80"}) == 403  # DNS rebinding
    assert _status(f"{url}/chat/completions", headers, b"[1, 2") == 400


def _status(url, headers, body=None):
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_client_that_leaves_mid_stream_cancels_its_reply(served):
    url, tokens, _log, services = served
    stream = _client(url, tokens["writer"]).chat.completions.create(
        model="engram/tiny", max_tokens=200, stream=True, messages=[{"role": "user", "content": "Go on and on"}])
    next(iter(stream))
    stream.close()
    # the next request is served: the first reply gave the model back
    reply = _client(url, tokens["writer"]).chat.completions.create(
        model="engram/tiny", max_tokens=4, messages=[{"role": "user", "content": "Still there?"}])
    assert reply.choices[0].finish_reason == "stop"
    assert len(_turns(services)) == 2


def test_settings_shows_the_apps_and_what_they_did_and_revokes(qtbot, served):
    url, tokens, _log, services = served
    _client(url, tokens["reader"]).models.list()
    _client(url, tokens["reader"]).chat.completions.create(
        model="engram/tiny", max_tokens=2, messages=[{"role": "user", "content": "Where is Mochi?"}])
    from app.ui.connected_apps import ConnectedApps
    box = ConnectedApps(services.data_dir)
    qtbot.addWidget(box)
    assert [box.clients.item(i).text() for i in range(box.clients.count())] == ["Reader — reads",
                                                                              "Cursor — reads and changes"]
    assert "Reader chatted, recalling" in box.recent.text()
    box.clients.setCurrentRow(0)
    box.revoke_button.click()
    assert box.clients.count() == 1
    with pytest.raises(openai.AuthenticationError):
        _client(url, tokens["reader"]).models.list()
