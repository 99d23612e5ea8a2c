"""A Hugging Face hub on 127.0.0.1 for the real models.hub.HubClient: the two endpoints a download uses.

GET /api/models/<repo>[/revision/<rev>]?blobs=true answers the file listing with sizes, git blob ids and LFS sha256s
as the hub does; GET /<repo>/resolve/<rev>/<file> serves the bytes, honouring `Range: bytes=N-` with a 206. It can
drop the connection partway through a file, ignore Range headers, or answer 503 a few times.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from hubfake import REPO, REVISION, git_blob_sha1


@dataclass
class HubServer:
    source: Path
    repo_id: str = REPO
    drop_after: dict[str, int] = field(default_factory=dict)  # file -> absolute byte where the connection drops once
    ignore_range: bool = False
    busy: int = 0  # answer 503 to this many requests first
    ranges: list[tuple[str, int]] = field(default_factory=list)  # (file, first byte asked for)
    served_bytes: int = 0

    def __enter__(self) -> "HubServer":
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def files(self) -> list[Path]:
        return sorted(p for p in self.source.iterdir() if p.is_file())

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files())

    def listing(self) -> dict:
        siblings = []
        for path in self.files():
            data = path.read_bytes()
            entry = {"rfilename": path.name, "size": len(data), "blobId": git_blob_sha1(data)}
            if path.suffix == ".safetensors":  # the weights live in LFS: the blob id is the pointer's
                entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
                entry["blobId"] = hashlib.sha1(b"pointer").hexdigest()
            siblings.append(entry)
        return {"id": self.repo_id, "modelId": self.repo_id, "sha": REVISION, "private": False, "siblings": siblings}


def _handler(hub: HubServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            if hub.busy > 0:
                hub.busy -= 1
                return self._reply(503, b"busy")
            path = self.path.split("?", 1)[0]
            api = f"/api/models/{hub.repo_id}"
            resolve = f"/{hub.repo_id}/resolve/{REVISION}/"
            if path == api or path.startswith(api + "/revision/"):
                return self._reply(200, json.dumps(hub.listing()).encode(), "application/json")
            if path.startswith(resolve) and (hub.source / path[len(resolve):]).is_file():
                return self._serve(path[len(resolve):])
            return self._reply(404, b"Repository Not Found")

        def _serve(self, name: str) -> None:
            data = (hub.source / name).read_bytes()
            start = 0
            header = self.headers.get("Range", "")
            if header.startswith("bytes=") and not hub.ignore_range:
                start = int(header[len("bytes="):].split("-", 1)[0])
            hub.ranges.append((name, int(header[6:].split("-")[0]) if header else 0))
            body = data[start:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            drop = hub.drop_after.pop(name, None)
            if drop is not None and drop > start:
                body = body[:drop - start]  # fewer bytes than promised, then the connection closes
                self.close_connection = True
            self.wfile.write(body)
            hub.served_bytes += len(body)

        def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
