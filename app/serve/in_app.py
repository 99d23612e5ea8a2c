"""`engram serve` inside the window: Settings' switch starts and stops the same OpenAI-compatible server
(app.serve.openai_api) in the app's own process, on 127.0.0.1 only.

Off by default; the switch's state is the setting `serve_api` (its port `serve_port`), so a window started again
serves again. The server's chats use a store connection of their own (SQLite wants one per thread, and WAL lets it
write while the window reads), the window's embedder and its chat model, whose MLX runs on the process's one MLX
thread (models/worker.py) — a chat from another app waits its turn behind the window's reply, as two windows would.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from app.serve.openai_api import HOST, ChatService, make_server
from core.clients import AccessLog, ClientRegistry


class InAppServer:
    def __init__(self, services: Any) -> None:
        self.services = services
        self._server: Any = None
        self._service: ChatService | None = None
        self._thread: threading.Thread | None = None
        self._db: Any = None
        self._lock = threading.Lock()

    @property
    def address(self) -> str | None:
        """http://127.0.0.1:PORT/v1 while serving, else None."""
        return None if self._server is None else f"http://{HOST}:{self._server.server_address[1]}/v1"

    def start(self, port: int) -> str:
        """Serve on 127.0.0.1:`port` (0: any free port); the address. OSError when the port is taken."""
        if self._server is not None:
            return self.address or ""
        data_dir = self.services.data_dir
        service = ChatService(self._assistant, ClientRegistry(data_dir, time.time), AccessLog(data_dir, time.time),
                              model_id=f"engram/{self.services.settings.chat_model or 'model'}")
        server = make_server(service, port)  # raises OSError before anything runs
        self._service, self._server = service.start(), server
        self._thread = threading.Thread(target=server.serve_forever, name="engram-serve", daemon=True)
        self._thread.start()
        return self.address or ""

    def stop(self) -> None:
        """Stop listening (the port is closed when this returns) and let the chats in progress end."""
        server, service, self._server, self._service = self._server, self._service, None, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()  # a kept-alive connection is not answered any more
        if service is not None:
            service.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            db, self._db = self._db, None
        if db is not None and service is not None:
            with service.generating:  # no chat or learning step is using the connection any more
                db.close()

    def _assistant(self) -> Any:
        from core.store.db import open_db
        with self._lock:
            if self._db is None:
                self._db = open_db(self.services.db_path)
            return self.services.assistant(db=self._db)


def attach(window: Any) -> InAppServer:
    """The window's server switch, made once."""
    server = getattr(window, "api_server", None)
    if server is None:
        server = window.api_server = InAppServer(window.services)
    return server
