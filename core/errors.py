"""Errors that reach the user: each says what is wrong in words a person can act on."""


class EngramError(Exception):
    """Base of every error Engram raises on purpose."""


class InvalidInput(EngramError, ValueError):
    """The caller gave something Engram will not store or search; nothing was changed."""


class NotFound(EngramError, LookupError):
    """An id that names no row."""


class NotADatabase(EngramError):
    """The file exists but is not an SQLite database."""


class StoreBusy(EngramError):
    """Another process held the store's write lock for longer than Engram waits; nothing was changed."""


class StoreCorrupt(EngramError):
    """The store's file is damaged; nothing more is written to it until the user checks or restores it."""


class StoreRefused(EngramError):
    """A file or folder Engram will not write into as it is: read-only, empty, or another application's."""


class SchemaTooNew(EngramError):
    """The file was written by a newer Engram; opening it could damage it."""


class EmbedderMismatch(EngramError):
    """The store's vectors were made by another embedding model or dimension."""


class ModelError(EngramError):
    """A chat model could not be found, loaded or run."""


class ModelMissing(ModelError):
    """The chat model is not chosen or not on this machine. The message names the command to run; `in_app` says
    the same for someone in the window, where the Models panel is the way."""

    def __init__(self, message: str, *, in_app: str) -> None:
        super().__init__(message)
        self.in_app = in_app


class GenerationStopped(ModelError):
    """A generation gave way before its end because something more urgent needs the model (a reply to the user)."""


class StructuredOutputError(ModelError):
    """Constrained generation ended before a complete, schema-valid object was produced."""


class WorkStopped(EngramError):
    """Long work was asked to stop before it finished and changed nothing (a re-embedding when the app quits)."""
