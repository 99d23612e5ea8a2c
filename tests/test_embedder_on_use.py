"""A one-shot verb loads the embedding model only when it embeds (app.services.wiring.EmbedderOnUse): `memory add`
of a statement already remembered and an import that brings nothing new never load it."""
from __future__ import annotations

from app.services.wiring import Services


def counting(monkeypatch, embedder) -> list:
    loads: list = []

    def load(*args, **kwargs):
        loads.append(kwargs.get("lasting"))
        return embedder
    monkeypatch.setattr("models.embeddings.load_embedder", load)
    return loads


def test_loaded_once_on_the_first_question_with_its_own_lasting(tmp_path, embedder, monkeypatch):
    loads = counting(monkeypatch, embedder)
    services = Services.from_data_dir(tmp_path, lasting=True)
    later = services.embedder_on_use(lasting=False)
    assert loads == []
    assert later.name == embedder.name and later.dimension == embedder.dimension
    assert (later.embed(["Ana lives in Porto"]) == embedder.embed(["Ana lives in Porto"])).all()
    assert loads == [False] and services.embedder is embedder  # the same one, kept for the process
    assert services.embedder_on_use().name == embedder.name and loads == [False]


def test_what_is_already_remembered_or_imported_loads_no_model(cli, embedder, monkeypatch, tmp_path):
    facts = tmp_path / "facts.txt"
    facts.write_text("Ana lives in Porto\nAna keeps bees\n", encoding="utf-8")
    assert cli("import", "memories", str(facts))[0] == 0
    assert cli("memory", "add", "Ana has a red kayak")[0] == 0
    loads = counting(monkeypatch, embedder)
    code, out, _ = cli("memory", "add", "ana has a red kayak.")
    assert code == 0 and out.startswith("already remembered") and loads == []
    code, out, _ = cli("import", "memories", str(facts))
    assert code == 0 and "2 already here" in out and loads == []
    code, out, _ = cli("memory", "add", "Ana has a blue canoe")
    assert code == 0 and out.startswith("remembered") and loads == [False]
