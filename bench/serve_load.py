"""The local API under load with the window open: `python -m bench.serve_load [--clients 6] [--requests 8]`.

A server process runs `engram serve`'s own ChatService and make_server over a fresh store with the tiny real MLX model
(models/testing.py: what is measured is Engram's overhead, not a model's speed). This process opens the main window
(offscreen) on the same store, with a stall probe — a 10 ms timer on the GUI thread whose longest gap is the
longest the window froze — and --clients threads of the `openai` client library send --requests chats each: read-
write and read-only, streamed and whole, and streams the client abandons after the first piece. Reported:
- lost writes: read-write chats sent minus turns stored (a cancelled reply is stored too, marked cancelled);
- busy failures: 5xx answers or a store that stayed busy; 429s (the queue bound doing its job) counted apart,
  retried by the client as it would be;
- latency p50/p95 of a whole chat through the server, against the same chats run directly through
  core.assistant.Assistant in the server's process before the load (the baseline, same model, same run): the
  difference is the HTTP path's overhead;
- the window's longest stall while it all ran.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.meta import load_average, stamp  # noqa: E402

SERVER = """
import json, sys, time
from pathlib import Path
from app.serve.openai_api import ChatService, make_server
from app.services.wiring import Services
from core.clients import AccessLog, ClientRegistry
from core.memory.manage import MemoryManager
from core.protocols import SamplingParams
from models.chat import ChatEngine
home, model = Path(sys.argv[1]), Path(sys.argv[2])
services = Services.from_data_dir(home)
services.chat = ChatEngine.load(model, context_tokens=2048)
MemoryManager(services.db, services.embedder).add("The user's cat is called Mochi")
assistant = services.assistant()
sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=12)  # what the clients ask for
baseline = []
for n in range(21):  # the same kind of chat, straight through the assistant: the baseline (the first warms up)
    start = time.perf_counter()
    prepared = assistant.prepare(None, f"Tell me about Mochi, number {n}")
    "".join(c.text for c in assistant.stream(prepared, sampling))
    baseline.append((time.perf_counter() - start) * 1000)
baseline = baseline[1:]
registry, log = ClientRegistry(home, time.time), AccessLog(home, time.time)
tokens = {"writer": registry.grant("Writer", "write"), "reader": registry.grant("Reader")}
service = ChatService(lambda: services.assistant(), registry, log, model_id="engram/tiny").start()
server = make_server(service)
print(json.dumps({"port": server.server_address[1], "tokens": tokens, "baseline_ms": baseline}), flush=True)
server.serve_forever()
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * share))], 1) if ordered else 0.0


def settled_count(store: Path, expected: int, wait: float = 60.0) -> int:
    """Turns stored once the server has finished the replies its clients abandoned (it stores them as cancelled
    after the client left); at most `wait` seconds."""
    from core.store.db import open_db
    deadline, count = time.monotonic() + wait, -1
    while time.monotonic() < deadline:
        db = open_db(store)
        try:
            count = db.scalar("SELECT count(*) FROM episodes WHERE user_text LIKE 'Client %'")
        finally:
            db.close()
        if count >= expected:
            break
        time.sleep(0.5)
    return count


def run_clients(url: str, tokens: dict, clients: int, requests: int,
                kinds: tuple[str, ...] = ("stream", "whole", "abandon"), writer: bool | None = None) -> dict:
    import openai
    results = {"latency_ms": [], "writes_sent": 0, "rate_limited": 0, "failures": [], "cancelled": 0}
    lock = threading.Lock()

    def one(worker: int, n: int) -> None:
        writes = (worker + n) % 3 != 2 if writer is None else writer
        client = openai.OpenAI(base_url=url, api_key=tokens["writer" if writes else "reader"], max_retries=6,
                               timeout=300)
        kind = kinds[(worker * requests + n) % len(kinds)]
        messages = [{"role": "user", "content": f"Client {worker} asks about Mochi, request {n}"}]
        start = time.perf_counter()
        try:
            if kind == "whole":
                client.chat.completions.create(model="engram/tiny", max_tokens=12, messages=messages)
            else:
                stream = client.chat.completions.create(model="engram/tiny", max_tokens=12, stream=True,
                                                        messages=messages)
                for _ in stream:
                    if kind == "abandon":
                        break
                stream.close()
        except openai.RateLimitError:
            with lock:
                results["rate_limited"] += 1
            return
        except Exception as exc:  # noqa: BLE001 - every failure is counted and named
            with lock:
                results["failures"].append(f"{type(exc).__name__}: {str(exc)[:120]}")
            return
        with lock:
            results["writes_sent"] += writes
            results["cancelled"] += kind == "abandon"
            if kind != "abandon":
                results["latency_ms"].append((time.perf_counter() - start) * 1000)

    def worker(index: int) -> None:
        for n in range(requests):
            one(index, n)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def with_window(home: Path, work) -> tuple[object, float]:
    """Run work() on a thread while the main window, open on the same store, answers its event loop; the longest
    gap between 10 ms ticks of a GUI-thread timer is the window's longest stall."""
    import os
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from app.services.wiring import Services
    from app.ui.main_window import MainWindow
    app = QApplication.instance() or QApplication([])
    window = MainWindow(Services.from_data_dir(home))
    window.show()
    clock, longest, box = QElapsedTimer(), [0.0], {}
    clock.start()
    last = [clock.elapsed()]

    def tick() -> None:
        now = clock.elapsed()
        longest[0] = max(longest[0], now - last[0] - 10)
        last[0] = now
    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(10)
    thread = threading.Thread(target=lambda: box.setdefault("result", work()))
    thread.start()
    while thread.is_alive():
        app.processEvents()
        time.sleep(0.002)
    timer.stop()
    window.close()
    window.runner.shutdown(wait=True)
    return box.get("result"), float(longest[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    from models.testing import build_tiny_model
    result = {**stamp("serve_load"), "clients": args.clients, "requests_each": args.requests}
    with tempfile.TemporaryDirectory(prefix="engram-serve-bench-") as folder:
        work = Path(folder)
        model = build_tiny_model(work / "tiny")
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(work / "home"), str(model)], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True)
        try:
            ready = json.loads(server.stdout.readline())
            url = f"http://127.0.0.1:{ready['port']}/v1"
            solo = run_clients(url, ready["tokens"], 1, 10, kinds=("whole",), writer=False)  # alone: the overhead
            load, stall = with_window(work / "home", lambda: run_clients(url, ready["tokens"], args.clients,
                                                                         args.requests))
            expected = load["writes_sent"]
            stored = settled_count(work / "home" / "engram.db", expected)
        finally:
            server.terminate()
            server.wait(timeout=60)
    result.update(
        lost_writes=expected - stored, writes_sent=expected, turns_stored=stored,
        busy_failures=len(load["failures"]), failures=load["failures"][:5], rate_limited_429=load["rate_limited"],
        abandoned_streams=load["cancelled"],
        solo_chat_p50_ms=percentile(solo["latency_ms"], 0.5), solo_chat_p95_ms=percentile(solo["latency_ms"], 0.95),
        chat_p50_ms=percentile(load["latency_ms"], 0.5), chat_p95_ms=percentile(load["latency_ms"], 0.95),
        direct_p50_ms=percentile(ready["baseline_ms"], 0.5), direct_p95_ms=percentile(ready["baseline_ms"], 0.95),
        window_longest_stall_ms=round(stall, 1), load_average_1m_at_end=load_average())
    result["http_overhead_p50_ms"] = round(result["solo_chat_p50_ms"] - result["direct_p50_ms"], 1)
    result["note"] = ("solo_chat_* is one client alone through HTTP, direct_* the same chat through the Assistant in "
                      "the server's process (neither stores the turn: a read-only client): their difference is the "
                      "HTTP path's overhead; chat_* (several clients at once) include waiting behind the other replies "
                      "for the one model")
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if result["lost_writes"] == 0 and result["busy_failures"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
