"""The generation, turn, startup and graph benches run end to end on small inputs (the real engine, the real store), so
they cannot rot between the runs that produce docs/BENCHMARKS.md."""
from __future__ import annotations

from bench import generate, turn
from models import structured


def test_generate_bench_times_engram_and_plain_mlx_lm_and_the_grammar(tiny_engine):
    streaming = generate.streaming_bench(tiny_engine, tokens=12, repeats=1)
    assert streaming["plain_mlx_lm_tokens_per_s"] > 0 and streaming["engram_tokens_per_s"] > 0
    assert abs(streaming["ratio"] - streaming["engram_tokens_per_s"] / streaming["plain_mlx_lm_tokens_per_s"]) < 0.01
    grammar = generate.structured_bench(tiny_engine, repeats=1)
    assert grammar["tokens_per_object"] > 0
    assert 0 < grammar["grammar_processor_ms_per_token"] < grammar["constrained_ms_per_token"]
    assert structured.Grammar is not generate.TimedGrammar  # the instrument is taken out again
    following = generate.next_turn_bench(tiny_engine, repeats=1, reply_tokens=4)
    # The product's prompt cache serves the first turn; plain mlx-lm reads it all.
    assert 0 < following["reused_from_cache_tokens"] < following["prompt_tokens"]
    assert following["engram_with_prompt_cache_ms"] > 0 and following["plain_mlx_lm_ms"] > 0


def test_turn_bench_on_a_small_store(tmp_path):
    result = turn.run([300], turns=6, passes_at=300, cache=tmp_path, log=lambda *_: None)  # real text, 300 turns
    size = result["sizes"]["300"]
    assert 0 < size["overhead_ms"]["p50"] <= size["overhead_ms"]["p95"] <= size["overhead_ms"]["p99"]
    assert 0 < size["overhead_cpu_ms"]["p50"] and size["recall_alone_ms"]["p50"] > 0
    assert size["memories_per_reply"] > 0  # the turns used memories, so the graph update had work to do
    assert result["idle_pass_at_n"] == 300 and result["idle_pass"]["scored"] > 0
    aged = result["after_idle_pass"]  # recall timed again on the store the idle pass aged
    assert aged["active_memories"] <= 304 and aged["recall_alone_ms"]["p50"] > 0
    assert (size["store"]["memories"], size["store"]["episodes"]) == (300, 30)  # bench/realstore.py's real text
    assert result["bench"] == "turn" and "commit" in result  # None outside a git checkout
    assert result["tokens_counted_with"].endswith("tokenizer")  # as the product counts a prompt, not len // 4


def test_without_the_real_models_package_the_turn_counts_tokens_with_the_tiny_models_tokenizer(monkeypatch):
    import models.testing_real
    from core.errors import ModelError

    def absent(**_):
        raise ModelError("The real test model is not installed")
    monkeypatch.setattr(models.testing_real, "build_real_model", absent)
    count, name = turn.token_counter()
    assert name == "the tiny test model's tokenizer" and 5 <= count("Where does my sister Marta live now?") <= 40


def test_startup_bench_sees_the_window_before_any_heavy_import():
    from bench import startup
    first = startup.measure(startup.DRIVER, 1)
    chosen = startup.measure(startup.DRIVER, 1, with_model=True)
    for run in (first, chosen):
        assert run["window_shown"] and run["median_s"] > 0
        assert run["heavy_modules_at_show"] == []  # MLX, torch, transformers... load when first needed


def test_graph_bench_times_pan_and_zoom_frames_against_an_empty_plot(qapp):
    from bench import graph
    result = graph.run(nodes=120, frames=3)
    assert result["nodes"] == 120 and result["layout_and_first_draw_s"] > 0
    for frames in (result["frame_ms"], result["baseline_empty_plot_frame_ms"]):
        for kind in ("pan", "zoom"):
            assert 0 < frames[kind]["p50"] <= frames[kind]["p95"] <= frames[kind]["max"]


def test_recall_bench_times_memories_and_turns_with_the_query_embedding_on_real_text(tmp_path):
    from bench import recall
    result = recall.run(300, 8, 0, cache=tmp_path, log=lambda *_: None)  # no cold run: it drops the page cache
    assert (result["store"]["memories"], result["store"]["episodes"]) == (300, 30)
    assert result["queries"] == 8 and result["kinds"] == "memories and turns, in a session"
    for key in ("recall_with_embedding_ms", "embed_query_ms", "recall_ms", "vector_knn_ms"):
        assert 0 < result[key]["p50"] <= result[key]["p95"]
    assert 0.0 <= result["knn_recall_at_10_vs_exact"] <= 1.0
