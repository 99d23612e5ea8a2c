"""`engram chat`: a streaming, memory-backed chat in the terminal with the chosen local model.

Each message goes through core.assistant.Assistant, as in the app: memories are recalled into the context, the
reply streams in as it is generated, the exchange is stored, and it is learned from (facts extracted and reconciled
with schema-constrained output) after the reply, on a thread of its own that gives way to the next reply
(app/cli/chat_learning.py). The memories recalled for a reply are listed under it, those it drew on first; what
was learned, before the next prompt. Ctrl-C stops the reply (not the program); Ctrl-D or /quit leaves. /new
starts a new conversation; /incognito toggles a conversation that is neither read from nor written to memory.
`--no-memory` chats with the model alone.
"""
from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Iterator, Protocol, TextIO

from app.cli.arguments import count, real
from app.cli.terminal import printable
from core.errors import EngramError, ModelError
from core.loop_trim import without_loop

if TYPE_CHECKING:  # core.protocols imports numpy: not while the command line is parsed
    from core.protocols import ChatMessage, GenerationChunk, SamplingParams

HELP = "Commands: /new (new conversation), /incognito (toggle remembering), /quit. Ctrl-C stops a reply."
SYSTEM_PROMPT = "You are Engram, a helpful assistant that runs privately on the user's own computer."


def register(subparsers: argparse._SubParsersAction) -> None:
    chat = subparsers.add_parser("chat", help="chat with the local model in the terminal (streaming)")
    chat.add_argument("--model", help="this model for this chat only: an installed name, repo id or folder")
    chat.add_argument("--incognito", action="store_true", help="start with remembering off")
    chat.add_argument("--max-tokens", type=count(1, 1_000_000), help="longest reply, in tokens")
    chat.add_argument("--temperature", type=real(0.0, 5.0), help="0 for the most likely words; higher for variety")
    chat.add_argument("--no-memory", action="store_true", help="the model alone: no recall, nothing stored")
    chat.set_defaults(func=cmd_chat, lasting=True)  # embeds every turn: the encoder fastest a query


class ChatBackend(Protocol):
    """One conversation at a time: stream a reply, then record it."""
    incognito: bool

    def new_conversation(self) -> None: ...

    def end_conversation(self) -> None: ...

    def stream(self, text: str, cancel: threading.Event) -> Iterator[GenerationChunk]: ...

    def finish(self, text: str, reply: str, finish_reason: str | None) -> str: ...

    def notes(self) -> list[str]: ...


@dataclass
class PlainBackend:
    """The model alone: the conversation lives in memory for this run and nothing is stored."""
    engine: Any
    sampling: SamplingParams
    incognito: bool = False
    history: list[ChatMessage] = field(default_factory=list)

    def new_conversation(self) -> None:
        self.history = []

    def end_conversation(self) -> None:
        pass  # nothing was stored

    def stream(self, text: str, cancel: threading.Event) -> Iterator[GenerationChunk]:
        from core.protocols import ChatMessage
        messages = [ChatMessage("system", SYSTEM_PROMPT), *self.history, ChatMessage("user", text)]
        return self.engine.stream(messages, self.sampling, cancel=cancel)

    def finish(self, text: str, reply: str, finish_reason: str | None) -> str:
        from core.protocols import ChatMessage
        if finish_reason == "repetition":
            reply = without_loop(reply)  # the loop, sent back as the model's own words, invites another
        self.history += [ChatMessage("user", text), ChatMessage("assistant", reply)]
        return ""

    def notes(self) -> list[str]:
        return []  # nothing is learned


@dataclass
class MemoryBackend:
    """The Assistant's turn pipeline: recall and context, stream, store the episode; `learner` learns from it."""
    assistant: Any
    sampling: SamplingParams
    learner: Any = None  # app.cli.chat_learning.BackgroundLearner
    incognito: bool = False
    session_id: int | None = None
    prepared: Any = None

    def new_conversation(self) -> None:
        self.end_conversation()
        self.session_id = None  # the next remembered message opens a new session

    def end_conversation(self) -> None:
        """The conversation is over (/new, /quit): reflection may review it when the user is away."""
        from core.store.sessions import end_session
        if self.session_id is not None:
            end_session(self.assistant.db, self.session_id)

    def close(self) -> None:
        """The chat ends: learn from the turns still waiting (Ctrl-C leaves them to `engram reflect`)."""
        if self.learner is None:
            return
        if self.learner.waiting:
            print(f"Learning from your last message{'s' if self.learner.waiting > 1 else ''}… (Ctrl-C leaves it "
                  "for later: `engram reflect` learns it)", file=sys.stderr)
        self.learner.close()
        for note in self.learner.take_notes():
            print(note)

    def stream(self, text: str, cancel: threading.Event) -> Iterator[GenerationChunk]:
        from core.store.sessions import create_session, discard_if_empty
        from core.store.text import clean_text
        clean_text(text, "message")  # a refused message (1 MB, invalid UTF-8) is said so, before anything is written
        created = None
        if self.session_id is None and not self.incognito:  # incognito writes nothing, not even a session
            self.session_id = created = create_session(self.assistant.db, title=text[:60])
        if self.learner is not None:
            self.learner.reply_started()  # learning gives way until the reply is over
        try:
            self.prepared = self.assistant.prepare(self.session_id, text, incognito=self.incognito)
            return self._then_learn(self.assistant.stream(self.prepared, self.sampling, cancel=cancel))
        except BaseException:
            if self.learner is not None:
                self.learner.reply_ended()
            if created is not None and discard_if_empty(self.assistant.db, created):
                self.session_id = None  # no empty conversation is left behind by a failed first message
            raise

    def _then_learn(self, chunks: Iterator[GenerationChunk]) -> Iterator[GenerationChunk]:
        try:
            yield from chunks
        finally:
            close_stream(chunks)
            if self.learner is not None:
                self.learner.reply_ended()

    def finish(self, text: str, reply: str, finish_reason: str | None) -> str:
        record = self.assistant.finish(self.prepared, reply, finish_reason)
        if self.learner is not None and record.episode_id is not None:
            self.learner.add(record)
        used = memory_note(self.prepared.used, None if record.episode_id is None else record.drew_on)
        if record.episode_id is None or not self.prepared.used_episodes:
            return used
        from core.memory.conversation import earlier_turns
        quoted = earlier_turns(self.assistant.db, self.prepared.used_episodes)
        return "\n".join(filter(None, (used, earlier_note(quoted, record.drew_on_turns))))

    def notes(self) -> list[str]:
        return self.learner.take_notes() if self.learner is not None else []


def close_stream(chunks: Iterator[Any]) -> None:
    """Stop the model's generation: a generator's close() runs its cleanup. A ChatModel's stream is promised only
    as an iterator, so one without close() (nothing to stop) is left as it is instead of raising."""
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


def memory_note(used: Any, drew_on: Collection[int] | None = None) -> str:
    """One line under a reply: the memories in its context, split by what it drew on when that is known (not in
    incognito, where nothing is stored); what it taught comes later (BackgroundLearner)."""
    if not used:
        return ""
    if drew_on is None:
        return "  [used " + _listed(used) + "]"
    drawn = {int(i) for i in drew_on}
    groups = (("drew on", [m for m in used if int(m.id) in drawn]),
              ("also recalled", [m for m in used if int(m.id) not in drawn]))
    return "  [" + " | ".join(f"{label} {_listed(memories)}" for label, memories in groups if memories) + "]"


def earlier_note(quoted: Any, drew_on: Collection[int]) -> str:
    """One line for the earlier conversation turns a stored reply quoted: those it drew on, and how many more."""
    if not quoted:
        return ""
    drawn = [t for t in quoted if int(t.episode_id) in {int(i) for i in drew_on}]
    parts = [f"drew on turn {t.episode_id} “{_short(' '.join(t.user_text.split()))}”" for t in drawn]
    left = len(quoted) - len(drawn)
    if left:
        parts.append(f"{left} more quoted" if drawn else f"quoted {left}, drew on none")
    return "  [from earlier conversations: " + "; ".join(parts) + "]"


def _listed(memories: Any) -> str:
    return "; ".join(f"#{m.id} {_short(m.text)}" for m in memories)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cmd_chat(args: argparse.Namespace, services: Any) -> int:
    from app.cli.models import open_store
    store = open_store(services)
    ref = args.model or services.settings.chat_model
    if not ref:
        raise ModelError(no_model_message(store))
    if args.model and _looks_like_a_folder(ref) and not Path(ref).expanduser().is_dir():
        raise ModelError(f"There is no folder {ref}: give a folder of MLX weights, the name of an installed model "
                         "(`engram models list`) or a Hugging Face repo id.")
    folder = store.resolve(ref)
    _decode_stdin_leniently()
    from core.protocols import SamplingParams
    from models.chat import ChatEngine
    from core.model_sampling import model_sampling  # this model's own sampling, as the window uses it
    generation = model_sampling(services.data_dir, ref, folder, services.settings.generation).applied_to(
        services.settings.generation)
    print(f"Loading {printable(ref)} ...", file=sys.stderr)
    engine = ChatEngine.load(folder, context_tokens=generation.context_tokens, total_ram=store.total_ram,
                             worker=services.mlx_worker)  # the embedder's MLX thread too (models/worker.py)
    try:
        if not args.no_memory:  # what Engram learned about you includes the weights it fine-tuned
            from app.services.wiring import use_active_adapter
            adapter = use_active_adapter(engine, services.db)
            if adapter is not None:
                print(f"Using your fine-tuned adapter ({printable(adapter.name)}); `engram finetune rollback` "
                      "turns it off.", file=sys.stderr)
        sampling = SamplingParams(
            temperature=generation.temperature if args.temperature is None else args.temperature,
            top_p=generation.top_p, max_tokens=args.max_tokens or generation.max_tokens)
        backend = PlainBackend(engine, sampling) if args.no_memory else memory_backend(services, engine, sampling)
        backend.incognito = bool(args.incognito)
        try:
            return ChatLoop(backend, sys.stdin, sys.stdout).run()
        finally:
            backend.end_conversation()
            if isinstance(backend, MemoryBackend):
                backend.close()
    finally:
        engine.unload()


def _looks_like_a_folder(ref: str) -> bool:
    """A path, not a model's name or a repo id (which has exactly one slash: owner/name)."""
    return ref.startswith(("/", "~", ".")) or ref.endswith("/") or ref.count("/") > 1


def _decode_stdin_leniently() -> None:
    """Bytes that are not UTF-8 reach the chat as a message it refuses by name ("not valid UTF-8"), instead of
    ending the chat with a decoding error (standard input decodes strictly by default)."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):
            pass


def memory_backend(services: Any, engine: Any, sampling: SamplingParams) -> MemoryBackend:
    from app.cli.chat_learning import BackgroundLearner
    from core.assistant import Assistant
    from core.store.db import open_db
    from models.structured import StructuredGenerator
    print("Loading memory ...", file=sys.stderr)
    embedder = services.embedder
    assistant = Assistant(services.db, embedder, engine, None, services.settings)  # it only answers and stores
    learner = BackgroundLearner(lambda: Assistant(open_db(services.db_path), embedder, engine,
                                                  StructuredGenerator(engine), services.settings))
    return MemoryBackend(assistant, sampling, learner)


def no_model_message(store: Any) -> str:
    from models.registry import default_model
    installed = store.installed()
    if installed:
        names = ", ".join(model.name for model in installed)
        return f"No chat model is chosen. Installed: {names}. Choose one with `engram models use NAME`."
    recommended = default_model(store.total_ram or 0)
    return (f"No chat model is installed. Download the one recommended for this computer with "
            f"`engram models download {recommended.name}` (see `engram models list` for others), or use a "
            "folder of MLX weights you already have with `engram models use FOLDER`.")


@dataclass
class ChatLoop:
    """Reads lines, streams replies and runs the slash commands."""
    backend: ChatBackend
    stdin: TextIO
    stdout: TextIO

    def run(self) -> int:
        self.say(HELP)
        while True:
            try:
                line = self.read_line()
            except KeyboardInterrupt:
                self.say("")  # Ctrl-C at the prompt clears the line, like a shell
                continue
            if line is None:
                return 0
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if self.command(text) == "quit":
                    return 0
                continue
            self.reply(text)

    def read_line(self) -> str | None:
        for note in self.backend.notes():  # what was learned while the user read the reply
            self.say(note)
        marker = "(incognito) you> " if self.backend.incognito else "you> "
        self.stdout.write(marker)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            self.say("")
            return None
        return line

    def command(self, text: str) -> str:
        name = text.split()[0].lower()
        if name in ("/quit", "/exit", "/q"):
            return "quit"
        if name == "/new":
            self.backend.new_conversation()
            self.say("New conversation.")
        elif name == "/incognito":
            self.backend.incognito = not self.backend.incognito
            self.say("Incognito on: nothing from here on is remembered." if self.backend.incognito
                     else "Incognito off: this conversation is remembered again.")
        else:
            self.say(HELP)
        return name

    def reply(self, text: str) -> None:
        """Stream one reply; Ctrl-C stops generation within a token and keeps what was said so far.

        A turn that fails (say, a message too long for the model's window) is reported and the chat goes on."""
        cancel = threading.Event()
        parts: list[str] = []
        finish_reason = None
        self.stdout.write("engram> ")
        try:
            stream = self.backend.stream(text, cancel)
            try:
                for chunk in stream:
                    parts.append(chunk.text)
                    self.stdout.write(chunk.text)
                    self.stdout.flush()
                    finish_reason = chunk.finish_reason or finish_reason
            except KeyboardInterrupt:
                cancel.set()
                finish_reason = "cancelled"
            finally:
                close_stream(stream)
        except EngramError as exc:
            self.say(f"\n[{exc}]")
            return
        said = "".join(parts)
        why = {"cancelled": "[stopped]", "repetition": "[stopped: the model was repeating itself]",
               "echo": "[stopped: the model began writing out its notes]"}.get(finish_reason or "", "")
        self.say(why if not why or not said or said[-1].isspace() else " " + why)  # one space, never two
        if finish_reason == "repetition" and without_loop(said) != said:  # printed, so it cannot be taken back
            self.say(f"Kept, without the repeats: {without_loop(said)}")
        note = self.backend.finish(text, said, finish_reason)
        if note:
            self.say(note)

    def say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()
