"""A model folder whose tokenizer maps text past the embedding table (mismatched or hostile files) is refused in
words when such text comes up; MLX does not bounds-check an embedding lookup: garbage at the first row past the
table, a segmentation fault (the window gone) a million rows past it. The structured path refuses such a model
when it builds its grammar's tokenizer."""
from __future__ import annotations

import json
import shutil

import pytest

from core.errors import ModelError
from core.protocols import ChatMessage, SamplingParams


@pytest.fixture
def mismatched_model(tiny_model_dir, tmp_path):
    folder = tmp_path / "mismatched"
    shutil.copytree(tiny_model_dir, folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["added_tokens"].append({"id": 512, "content": "zebra", "single_word": False, "lstrip": False,
                                      "rstrip": False, "normalized": False, "special": False})
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    return folder


def test_a_token_past_the_embedding_is_refused_and_other_text_still_answers(mismatched_model):
    from models.chat import ChatEngine
    engine = ChatEngine.load(mismatched_model, context_tokens=1024)
    sampling = SamplingParams(temperature=0.0, max_tokens=4)
    try:
        with pytest.raises(ModelError, match=r"^This model's tokenizer gives token 512, but its weights hold 512 "
                                             r"tokens: the model's files do not belong together\. Choose another"):
            list(engine.stream([ChatMessage("user", "I saw a zebra at the zoo")], sampling))
        assert [c for c in engine.stream([ChatMessage("user", "hello there")], sampling)]  # the engine lives on
    finally:
        engine.unload()


def test_the_structured_path_is_guarded_too(mismatched_model):
    from models.chat import ChatEngine
    from models.structured import StructuredGenerator
    engine = ChatEngine.load(mismatched_model, context_tokens=1024)
    try:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
        with pytest.raises(ModelError, match="the model's files do not belong together"):
            StructuredGenerator(engine).generate_json([ChatMessage("user", "a zebra")], schema, max_tokens=8)
    finally:
        engine.unload()


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_an_embedding_model_whose_tokenizer_outgrows_its_weights_is_refused(tmp_path, backend):
    from models.bert_embedder import load_bert_embedder, read_recipe
    from models.embeddings import bundled_minilm_folder
    folder = tmp_path / "embedder"
    shutil.copytree(bundled_minilm_folder(), folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["added_tokens"].append({"id": 30522, "content": "okapi-zebra", "single_word": False, "lstrip": False,
                                      "rstrip": False, "normalized": False, "special": False})
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    embedder = load_bert_embedder(folder, read_recipe(folder), name="mismatched", backend=backend)
    assert embedder.embed(["a quiet afternoon"]).shape == (1, 384)
    for texts in (["an okapi-zebra"], ["a quiet afternoon", "an okapi-zebra"]):
        with pytest.raises(ModelError, match=r"^The embedding model's tokenizer gives token 30522, but its weights "
                                             r"hold 30522: its files do not belong together"):
            embedder.embed(texts)
