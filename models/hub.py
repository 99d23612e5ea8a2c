"""The Hugging Face hub as a download needs it: a repo's files with their checksums, and any file from a byte offset.

HubClient is the real one (huggingface_hub's HTTP session, so proxies, tokens and offline mode behave as the
user set them); tests pass a local stand-in with the same three methods. Errors worth retrying (a dropped
connection, a timeout, 408/429/5xx) are TransientNetworkError; the rest are ModelError saying what is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from core.errors import ModelError

# What a chat model needs from a repo (config, weights, tokenizer, chat template); READMEs and images stay there.
ALLOW_PATTERNS = ["*.json", "model*.safetensors", "*.py", "tokenizer.model", "*.tiktoken", "tiktoken.model",
                  "*.txt", "*.jsonl", "*.jinja"]
RETRY_STATUS = (408, 429, 500, 502, 503, 504)
TIMEOUT_SECONDS = 30.0


class TransientNetworkError(Exception):
    """A failure that may pass on its own: retried with backoff, then reported as a stopped download."""


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int
    sha256: str | None = None  # LFS files (the weights): the hub keeps their sha256
    git_sha1: str | None = None  # small files kept in git: their blob id, sha1 of "blob <size>\0" + content


@dataclass(frozen=True)
class RepoListing:
    revision: str  # the commit every file is read from, so a download never mixes two versions
    files: tuple[RemoteFile, ...]


class HubClient:
    def __init__(self, endpoint: str | None = None) -> None:
        self.endpoint = endpoint  # None: huggingface_hub's (HF_ENDPOINT or huggingface.co)

    def listing(self, repo_id: str) -> RepoListing:
        from huggingface_hub import HfApi  # deferred: slow to import, and only a user's download needs it
        try:
            info = HfApi(endpoint=self.endpoint).model_info(repo_id, files_metadata=True, timeout=TIMEOUT_SECONDS)
        except Exception as exc:
            raise _classify(exc, f"Cannot reach {repo_id} on Hugging Face") from exc
        files = tuple(RemoteFile(s.rfilename, int(s.size or (s.lfs.size if s.lfs else 0)),
                                 s.lfs.sha256 if s.lfs else None, None if s.lfs else s.blob_id)
                      for s in info.siblings or ())
        return RepoListing(str(info.sha), files)

    def chunks(self, repo_id: str, revision: str, filename: str, start: int) -> Iterator[bytes]:
        """The file's bytes from `start` on (an HTTP Range; a server that ignores it has the skipped part dropped)."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session
        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=self.endpoint)
        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}  # a Range counts the file's own bytes,
        # not a gzip stream's (the hub gzips small text files when asked)
        if start > 0:
            headers["Range"] = f"bytes={start}-"
        try:
            with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                                      timeout=TIMEOUT_SECONDS) as response:
                _raise_for_status(response, filename)
                skip = start if start > 0 and response.status_code == 200 else 0
                for chunk in response.iter_bytes():  # as they arrive: a sized chunker loses its buffer on a drop
                    if skip:
                        dropped = min(skip, len(chunk))
                        chunk, skip = chunk[dropped:], skip - dropped
                    if chunk:
                        yield chunk
        except (TransientNetworkError, ModelError):
            raise
        except Exception as exc:
            raise _classify(exc, f"Cannot download {filename}") from exc

    def cached(self, repo_id: str) -> Path | None:
        """The repo's folder in the Hugging Face cache when it is complete there; never the network."""
        from huggingface_hub import snapshot_download
        try:
            path = Path(snapshot_download(repo_id, allow_patterns=ALLOW_PATTERNS, local_files_only=True))
        except Exception:  # not in the cache: huggingface_hub raises LocalEntryNotFoundError and friends
            return None
        return path if (path / "config.json").is_file() else None


def _raise_for_status(response: Any, filename: str) -> None:
    status = response.status_code
    if status in RETRY_STATUS:
        raise TransientNetworkError(f"the hub answered {status} for {filename}")
    if status >= 400:
        raise ModelError(f"The hub refused {filename} (HTTP {status}).")


def _classify(exc: BaseException, what: str) -> BaseException:
    """A dropped connection or a busy server is transient; anything else is a ModelError in one line."""
    import httpx2
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    transient = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)
    if isinstance(exc, transient) or status in RETRY_STATUS:
        return TransientNetworkError(f"{what}: {_first_line(exc)}")
    return ModelError(f"{what}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
