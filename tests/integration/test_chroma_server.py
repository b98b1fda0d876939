"""Personas of their own data dirs on one real `chroma run` server: each keeps its vectors in its own database
there (never one shared collection), and a clone's vectors are copied into the child's own database — by the
persona's consented `persona.spawn` and by `run.py spawn`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli import app
from memory import Database
from nodes.context import utcnow
from persona.settings import Overrides
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer
from tests.unit.test_spawn import block, parent

pytestmark = pytest.mark.integration


def texts(agent, query: str) -> list[str]:
    return [h.item.text for h in agent.services.memory.search(query)]


def vector_database(data_dir) -> str | None:
    database = Database.open(data_dir)
    try:
        with database.unit() as repos:
            return repos.config.get("vectors/chroma_database")
    finally:
        database.close()


def test_two_personas_on_one_server_keep_their_vectors_apart_and_a_consented_clone_gets_its_own(tmp_path, chroma_url):
    lumen, _, _ = parent(
        tmp_path,
        block(("persona.spawn", {"name": "Mira", "mode": "clone"}), text="A child."),
        "The beam turns.",
        chroma_url=chroma_url,
    )
    lumen.services.memory.sync(flush=True)
    other = make_agent(tmp_path / "other", FakeLLM("fake"), chroma_url=chroma_url)
    with other.services.db.unit() as repos:
        repos.diary.add("Bees hum on the cliff above the harbour.")
    other.services.memory.sync(flush=True)

    assert lumen.services.memory.chroma_database != other.services.memory.chroma_database
    assert lumen.services.memory.collection.count() > 0 and other.services.memory.collection.count() > 0
    assert any("storm of March" in t for t in texts(lumen, "storm broke the windows"))
    assert not any("Bees" in t for t in texts(lumen, "bees hum on the cliff"))
    assert not any("storm of March" in t for t in texts(other, "storm broke the windows"))
    other.services.db.close()

    lumen.tick()
    with lumen.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
    answer(lumen.services.db, approval.id, approve=True, by="human", now=utcnow())
    state = lumen.tick()
    [ran] = [e for e in state["executed"] if e.get("approval_id") == approval.id]
    assert ran["status"] == "executed", ran
    lumen.services.memory.sync(flush=True)
    parent_vectors, parent_database = lumen.services.memory.collection.count(), lumen.services.memory.chroma_database
    child_data = tmp_path / "data-mira"
    child_database = vector_database(child_data)
    assert child_database and child_database != parent_database  # never the parent's
    child = make_agent(
        child_data, FakeLLM("fake"), persona_dir=str(tmp_path / "personas" / "mira"), chroma_url=chroma_url
    )
    assert child.services.memory.chroma_database == child_database
    assert child.services.memory.collection.count() >= parent_vectors - 2  # copied (the spawning tick's own may follow)
    assert any("storm of March" in t for t in texts(child, "storm broke the windows"))
    child.services.db.close()
    lumen.services.db.close()


def test_run_py_spawn_clone_copies_the_vectors_into_the_child_s_own_server_database(tmp_path, chroma_url):
    from graph.services import open_memory_index, open_settings

    lumen, _, data = parent(tmp_path)
    lumen.services.db.close()
    said = CliRunner().invoke(
        app, ["spawn", "Nova", "--mode", "clone", "--data-dir", str(data), "--chroma-url", chroma_url, "--json"]
    )
    assert said.exit_code == 0, said.output
    report = json.loads(said.output[said.output.index("{") :])
    assert report["vectors"] > 0
    parent_database, child_database = vector_database(data), vector_database(tmp_path / "data-nova")
    assert parent_database and child_database and parent_database != child_database
    child_db = Database.open(tmp_path / "data-nova")
    settings = open_settings(
        child_db,
        Overrides.of(
            data_dir=str(tmp_path / "data-nova"), chroma_url=chroma_url, persona_dir=str(tmp_path / "personas" / "nova")
        ),
    )
    index = open_memory_index(child_db, settings)  # the embedder `run.py` uses, as the spawn did
    try:
        assert index.chroma_database == child_database and index.collection.count() == report["vectors"]
        assert any("storm of March" in h.item.text for h in index.search("storm broke the windows"))
    finally:
        index.close()
        child_db.close()
