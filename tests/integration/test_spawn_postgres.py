"""Spawn on PostgreSQL: the child gets a new database on the parent's server (or the one named), every row with
its id, sequences moved past them so the child writes on without a clash, and it records its parent."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli import app
from memory import Database
from tests.unit.test_spawn import counts, parent

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg_url(postgres):
    """A database of this module's own on the session's PostgreSQL cluster (tests/conftest.py)."""
    return postgres.database("spawn")


def test_clone_and_trained_children_on_postgres(tmp_path, pg_url):
    agent, persona, data = parent(tmp_path, db_url=pg_url)
    agent.tick()
    agent.services.sync_memory()
    expected = counts(agent.services.db)
    agent.services.db.close()
    runner = CliRunner()
    said = runner.invoke(app, ["spawn", "Mira", "--mode", "clone", "--data-dir", str(data), "--db", pg_url, "--json"])
    assert said.exit_code == 0, said.output
    report = json.loads(said.output[said.output.index("{") :])
    child_url = f"{pg_url}_mira"  # the parent's database's name and the child's
    assert report["database"].endswith(child_url.rsplit("/", 1)[1]) and report["vectors"] > 0
    child = Database.open(url=child_url)
    assert child.is_postgres and counts(child) == expected
    with child.unit() as repos:
        assert repos.config.get("lineage/parent")["name"] == "Lumen"
        entry = repos.diary.add("Mira's own first entry.")  # the sequences moved past the copied ids
        assert entry.id == 2
        note = repos.notes.add("a note for Mira", source="user")
        assert note.id == expected["notes"] + 1
    child.close()

    target = Database.open(url=pg_url.rsplit("/", 1)[0] + "/postgres")  # the child's own database, made by hand
    from memory.repositories.transfer import create_postgres_database

    named = create_postgres_database(target.libpq_url(), "nova_db")
    target.close()
    said = runner.invoke(
        app, ["spawn", "Nova", "--mode", "trained", "--data-dir", str(data), "--db", pg_url, "--to-db", named]
    )
    assert said.exit_code == 0, said.output
    trained = Database.open(url=named)
    assert counts(trained) == {
        **{k: 0 for k in expected},
        "goals": 1,
        "tasks": 1,
        "concepts": 2,
        "links": 1,
        "llm_memory": 1,
        "insights": 1,
        "diary": 1,
    }  # HMP: trained takes the diary
    trained.close()
