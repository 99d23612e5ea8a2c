"""Other apps on this machine that may use the memory, and what each of them did (issue 39 §2).

Nothing is shared until the user grants a client by name (`engram clients grant Cursor [--write]`): read-only
(search and list the memory; a chat through the API recalls but never stores or learns), or read-write (also add,
edit and forget memories, and the API's chats are stored and learned from like the window's). A grant gives a
token, shown once; only its SHA-256 is kept, in clients.json (0600) in the data folder. Revoking takes effect at
the next request. Every read and write by a client is appended to logs/access.jsonl, which the app and
`engram clients log` show ("Cursor read 3 memories at 14:02").
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from core.errors import InvalidInput

READ, WRITE = "read", "write"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}$")
LOG_LIMIT = 5_000_000  # bytes; the log rolls over to .1 past this


@dataclass(frozen=True)
class Client:
    name: str
    access: str  # READ or WRITE
    token_sha256: str
    granted_at: float

    @property
    def can_write(self) -> bool:
        return self.access == WRITE


@dataclass(frozen=True)
class Access:
    at: float
    client: str
    action: str  # "read", "searched", "added", "edited", "forgot", "chat", "refused"
    count: int = 0
    detail: str = ""

    def describe(self) -> str:
        when = dt.datetime.fromtimestamp(self.at).strftime("%Y-%m-%d %H:%M")
        what = {"read": f"read {self.count} {'memory' if self.count == 1 else 'memories'}",
                "chat": f"chatted, recalling {self.count} {'memory' if self.count == 1 else 'memories'}"}.get(
            self.action, f"{self.action} {self.detail}".strip())
        return f"{self.client} {what} at {when}"


class ClientRegistry:
    """clients.json in `folder`; safe across threads of one process (one lock), written atomically."""

    def __init__(self, folder: Path | str, clock: Callable[[], float]) -> None:
        self.path = Path(folder) / "clients.json"
        self.clock = clock
        self._lock = threading.Lock()

    def grant(self, name: str, access: str = READ) -> str:
        """A new token for `name` (replacing any it had); returned once, never stored."""
        name = checked_name(name)
        if access not in (READ, WRITE):
            raise InvalidInput(f"access must be {READ} or {WRITE}, not {access!r}")
        token = "engram-" + secrets.token_urlsafe(32)
        with self._lock:
            clients = {c.name: c for c in self._read()}
            clients[name] = Client(name, access, _digest(token), self.clock())
            self._write(list(clients.values()))
        return token

    def revoke(self, name: str) -> None:
        with self._lock:
            clients = self._read()
            if not any(c.name == name for c in clients):
                raise InvalidInput(f"no client named {name!r} (`engram clients list` shows them)")
            self._write([c for c in clients if c.name != name])

    def clients(self) -> list[Client]:
        with self._lock:
            return self._read()

    def authenticate(self, token: str | None) -> Client | None:
        """The client holding `token`, compared in constant time; None for a missing, wrong or revoked one."""
        if not token or not isinstance(token, str) or len(token) > 200:
            return None
        digest = _digest(token)
        found = None
        for client in self.clients():
            if hmac.compare_digest(client.token_sha256, digest):
                found = client
        return found

    def _read(self) -> list[Client]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"{self.path.name} is damaged ({exc}); grant the clients again") from None
        rows = raw.get("clients", []) if isinstance(raw, dict) else []
        return [Client(str(r["name"]), str(r["access"]), str(r["token_sha256"]), float(r["granted_at"]))
                for r in rows if isinstance(r, dict) and {"name", "access", "token_sha256", "granted_at"} <= set(r)]

    def _write(self, clients: list[Client]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".clients-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp: 0600 from the start
            json.dump({"clients": [asdict(c) for c in clients]}, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)


class AccessLog:
    """logs/access.jsonl in `folder`: one line an access, appended; read newest first."""

    def __init__(self, folder: Path | str, clock: Callable[[], float]) -> None:
        self.path = Path(folder) / "logs" / "access.jsonl"
        self.clock = clock
        self._lock = threading.Lock()

    def record(self, client: str, action: str, count: int = 0, detail: str = "") -> Access:
        entry = Access(self.clock(), client, action, int(count), detail[:300])
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > LOG_LIMIT:
                os.replace(self.path, self.path.with_suffix(".jsonl.1"))
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(descriptor, "a", encoding="utf-8") as out:
                out.write(json.dumps(asdict(entry), ensure_ascii=False) + "\n")
        return entry

    def recent(self, limit: int = 50) -> list[Access]:
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()[-limit:]
        except FileNotFoundError:
            return []
        found = []
        for line in reversed(lines):
            try:
                row = json.loads(line)
                found.append(Access(float(row["at"]), str(row["client"]), str(row["action"]), int(row["count"]),
                                    str(row.get("detail", ""))))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash
        return found


def checked_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.match(name.strip()):
        raise InvalidInput("a client's name is 1–40 letters, digits, spaces, dots, dashes or underscores")
    return name.strip()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
