"""`engram serve`: an OpenAI-compatible endpoint on 127.0.0.1, with the window's memory path (issue 39 §2).

GET /v1/models and POST /v1/chat/completions (streamed as server-sent events, or whole), so any OpenAI client library
works unchanged against http://127.0.0.1:PORT/v1 with the token the user granted (core.clients). A chat goes the
window's way: recall into the prompt (core.assistant.Assistant.prepare, the request's earlier messages as the
conversation's history), the model's reply, then — for a read-write client only — the turn stored in that client's
own conversation, with its attribution, and learned from in the background. A read-only client's chat recalls and
stores nothing. Every chat is in the access log.

Bounds, because any local process can knock: loopback only (the address is fixed, and a Host header that is not
loopback is refused, against DNS rebinding); a bearer token on every request, compared in constant time; a body of at
most MAX_BODY bytes; RATE requests a minute per client; one reply at a time (MLX runs on one owner) and at most
QUEUE waiting, beyond which the answer is 429 with Retry-After. A client that disconnects mid-stream cancels its reply.
"""
from __future__ import annotations

import json
import queue
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

from core.clients import AccessLog, Client, ClientRegistry
from core.errors import InvalidInput
from core.protocols import SamplingParams

HOST = "127.0.0.1"
MAX_BODY = 1024 * 1024
DRAIN_MAX = 16 * MAX_BODY  # a refused body read and dropped, so the refusal reaches the client
RATE = 60  # requests per client per minute
QUEUE = 4  # chats waiting for the model beyond the one being answered
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass
class ChatService:
    """What the handler calls: one assistant (one store connection, one model) used under one lock by the request
    threads and the learning thread in turn; the grants, the log, the learning queue."""
    make_assistant: Callable[[], Any]  # the Assistant over this process's store connection and chat model
    registry: ClientRegistry
    log: AccessLog
    model_id: str = "engram"
    generating: threading.Lock = field(default_factory=threading.Lock)
    waiting: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(QUEUE + 1))
    learning: "queue.Queue[Any]" = field(default_factory=queue.Queue)
    sessions: dict[str, int] = field(default_factory=dict)
    _recent: dict[str, deque] = field(default_factory=dict)
    _rate_lock: threading.Lock = field(default_factory=threading.Lock)
    _wanting: int = 0  # chats waiting for or holding the model: learning gives way to them
    _assistant: Any = None

    def start(self) -> "ChatService":
        threading.Thread(target=self._learn_forever, name="engram-serve-learning", daemon=True).start()
        return self

    def client_for(self, token: str | None) -> Client:
        client = self.registry.authenticate(token)
        if client is None:
            raise ApiError(401, "a valid token is needed: the user grants one with `engram clients grant NAME`",
                           "authentication_error")
        with self._rate_lock:
            window = self._recent.setdefault(client.name, deque())
            now = time.monotonic()
            while window and now - window[0] > 60:
                window.popleft()
            if len(window) >= RATE:
                raise ApiError(429, f"more than {RATE} requests a minute", "rate_limit_exceeded")
            window.append(now)
        return client

    def chat(self, client: Client, request: dict[str, Any], cancel: threading.Event) -> Iterator[str]:
        """The reply's text, piece by piece; the turn is finished (stored, queued for learning) when it ends."""
        history, text, instructions = _conversation(request.get("messages"))
        sampling = _sampling(request)
        if not self.waiting.acquire(blocking=False):
            raise ApiError(429, "Engram is answering other requests; try again shortly", "rate_limit_exceeded")
        with self._rate_lock:
            self._wanting += 1
        try:
            with self.generating:
                yield from self._answer(client, history, text, instructions, sampling, cancel)
        finally:
            with self._rate_lock:
                self._wanting -= 1
            self.waiting.release()

    def _answer(self, client: Client, history: list[tuple[str, str]], text: str, instructions: str,
                sampling: SamplingParams, cancel: threading.Event) -> Iterator[str]:
        assistant = self._assistant_now()
        session_id = self._session(assistant, client) if client.can_write else None
        prepared = assistant.prepare(session_id, text, history=history)
        if instructions:
            prepared = _with_client_instructions(prepared, client.name, instructions)
        self.log.record(client.name, "chat", len(prepared.used))
        parts, reason = [], None
        chunks = assistant.stream(prepared, sampling, cancel=cancel)
        try:
            for chunk in chunks:
                parts.append(chunk.text)
                reason = chunk.finish_reason or reason
                if chunk.text:
                    yield chunk.text
        finally:
            chunks.close()
            if client.can_write:
                record = assistant.finish(prepared, "".join(parts), "cancelled" if cancel.is_set() else reason)
                if record.episode_id is not None:
                    self.learning.put(record)

    def _assistant_now(self) -> Any:
        if self._assistant is None:
            self._assistant = self.make_assistant()
        return self._assistant

    def _session(self, assistant: Any, client: Client) -> int:
        from core.store.sessions import create_session
        if client.name not in self.sessions:
            self.sessions[client.name] = create_session(assistant.db, title=f"{client.name} (through the API)")
        return self.sessions[client.name]

    def _learn_forever(self) -> None:
        while True:
            record = self.learning.get()
            if record is None:
                return
            try:
                with self.generating:  # a chat asking for the model meanwhile goes first; the turn stays pending
                    self._assistant_now().learn(record, busy=lambda: self._wanting > 0)
            except Exception:  # noqa: BLE001 - the turn stays pending; idle-time learning takes it up
                pass

    def close(self) -> None:
        self.learning.put(None)


def _conversation(messages: Any) -> tuple[list[tuple[str, str]], str, str]:
    """(earlier (user, assistant) pairs, the last user message, the client's system instructions)."""
    if not isinstance(messages, list) or not messages or len(messages) > 500:
        raise ApiError(400, "messages must be a list of 1 to 500 messages")
    system, turns = [], []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer", "user", "assistant"):
            raise ApiError(400, "each message needs a role of system, user or assistant")
        content = _content(message.get("content"))
        if message["role"] in ("system", "developer"):
            system.append(content)
        else:
            turns.append((message["role"], content))
    if not turns or turns[-1][0] != "user" or not turns[-1][1].strip():
        raise ApiError(400, "the last message must be the user's, with text")
    history, question = [], None
    for role, content in turns[:-1]:
        if role == "user":
            question = content
        elif question is not None:
            history.append((question, content))
            question = None
    return history, turns[-1][1], "\n".join(s for s in system if s.strip())


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # [{"type": "text", "text": ...}, {"type": "image_url", ...}]: the text parts
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and p.get("type") == "text"
                         and isinstance(p.get("text"), str))
    if value is None:
        return ""
    raise ApiError(400, "a message's content must be text")


def _sampling(request: dict[str, Any]) -> SamplingParams:
    base = SamplingParams()
    values = {"temperature": (request.get("temperature", base.temperature), 0.0, 2.0),
              "top_p": (request.get("top_p", base.top_p), 0.0, 1.0),
              "max_tokens": (request.get("max_tokens") or request.get("max_completion_tokens") or base.max_tokens,
                             1, 8192)}
    checked: dict[str, Any] = {}  # validated numbers, by SamplingParams' field names
    for name, (value, low, high) in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ApiError(400, f"{name} must be a number from {low} to {high}")
        checked[name] = int(value) if name == "max_tokens" else float(value)
    return SamplingParams(**checked)


def _with_client_instructions(prepared: Any, client: str, instructions: str) -> Any:
    """The client's system message, after Engram's own and marked as the client's: one system message, as every
    chat template accepts."""
    from dataclasses import replace

    from core.protocols import ChatMessage
    messages = list(prepared.messages)
    if messages and messages[0].role == "system":
        messages[0] = ChatMessage("system", f"{messages[0].content}\n\nInstructions from {client}, the app the "
                                            f"user is chatting through:\n{instructions[:8000]}")
    return replace(prepared, messages=tuple(messages))


class Handler(BaseHTTPRequestHandler):
    server_version = "Engram"
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a socket read or write may stall: a client trickling a body cannot hold a thread forever
    service: ChatService  # set on the class made by make_server

    def log_message(self, *_args: Any) -> None:  # the access log is the user's record, not stderr
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._guarded(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._guarded(self._post)

    def _get(self) -> None:
        self._client()
        if self.path.rstrip("/") != "/v1/models":
            raise ApiError(404, f"no such endpoint: GET {self.path[:100]}")
        self._json(200, {"object": "list", "data": [{"id": self.service.model_id, "object": "model", "created": 0,
                                                     "owned_by": "engram"}]})

    def _post(self) -> None:
        client = self._client()
        if self.path.rstrip("/") != "/v1/chat/completions":
            raise ApiError(404, f"no such endpoint: POST {self.path[:100]}")
        request = self._body()
        cancel = threading.Event()
        pieces = self.service.chat(client, request, cancel)
        ident, created = f"chatcmpl-{time.time_ns():x}", int(time.time())
        if request.get("stream"):
            self._stream(pieces, ident, created, cancel)
        else:
            text = "".join(pieces)
            self._json(200, {"id": ident, "object": "chat.completion", "created": created,
                             "model": self.service.model_id, "choices": [{
                                 "index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

    def _stream(self, pieces: Iterator[str], ident: str, created: int, cancel: threading.Event) -> None:
        first = next(pieces, None)  # errors before the first token still get a status code of their own
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(delta: dict, finish: str | None = None) -> None:
            data = {"id": ident, "object": "chat.completion.chunk", "created": created,
                    "model": self.service.model_id, "choices": [{"index": 0, "delta": delta,
                                                                 "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8"))
            self.wfile.flush()
        try:
            event({"role": "assistant", "content": ""})
            for piece in ([first] if first is not None else []):
                event({"content": piece})
            for piece in pieces:
                event({"content": piece})
            event({}, "stop")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            cancel.set()  # the client left: stop the reply at the next token
            for _ in pieces:
                pass

    def _client(self) -> Client:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        if host not in LOOPBACK_HOSTS:
            raise ApiError(403, "Engram answers only requests addressed to this machine (127.0.0.1)")
        header = self.headers.get("Authorization") or ""
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        return self.service.client_for(token)

    def _body(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise ApiError(411, "a Content-Length is needed")
        if int(length) > MAX_BODY:
            self._discard(int(length))
            raise ApiError(413, f"a request is at most {MAX_BODY // 1024} KB")
        try:
            body = json.loads(self.rfile.read(int(length)).decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ApiError(400, f"the body is not JSON ({str(exc)[:100]})") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _discard(self, length: int) -> None:
        """Read and drop a refused body (up to DRAIN_MAX bytes) so the client, still sending, can read the refusal
        instead of a broken pipe; a larger one is cut off with the connection."""
        self.close_connection = True
        left = min(length, DRAIN_MAX)
        while left > 0:
            try:
                chunk = self.rfile.read(min(left, 64 * 1024))
            except OSError:  # the socket's timeout, or the client left
                return
            if not chunk:
                return
            left -= len(chunk)

    def _json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if status == 429:
            self.send_header("Retry-After", "2")
        self.end_headers()
        self.wfile.write(raw)

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except ApiError as exc:
            self._error(exc.status, str(exc), exc.kind)
        except InvalidInput as exc:
            self._error(400, str(exc), "invalid_request_error")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - one JSON error, never a traceback on the wire
            self._error(500, f"Engram could not answer: {type(exc).__name__}", "server_error")

    def _error(self, status: int, message: str, kind: str) -> None:
        try:
            self._json(status, {"error": {"message": message, "type": kind, "code": status}})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class LoopbackServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its open connections: stopping it ends them too. A client's kept-alive
    connection would otherwise go on being answered after the switch was turned off, and hold the port."""
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.connections: set[Any] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def get_request(self) -> tuple[Any, Any]:
        request, address = super().get_request()
        with self._connections_lock:
            self.connections.add(request)
        return request, address

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self, wait: float = 2.0) -> None:
        """End every open connection, and wait up to `wait` seconds for their handlers to let go of them (a reply
        being written finishes first)."""
        with self._connections_lock:
            open_now = list(self.connections)
        for request in open_now:
            try:  # closed with a reset when its handler lets go: no half-closed socket keeps the port a minute
                request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                request.shutdown(socket.SHUT_RDWR)  # its handler's next read ends, and the handler with it
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while self.connections and time.monotonic() < deadline:
            time.sleep(0.02)


def make_server(service: ChatService, port: int = 0) -> LoopbackServer:
    """A server bound to 127.0.0.1 only (port 0: any free port; server.server_address says which)."""
    handler = type("EngramHandler", (Handler,), {"service": service})
    return LoopbackServer((HOST, port), handler)
