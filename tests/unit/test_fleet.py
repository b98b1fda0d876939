"""The parts of a deployment that need no server: names, persona files in the registry, checkpoint threads per
persona, the `/p/<name>/` prefix of the web app, and what a data-dir app says about a deployment's routes.
(The real thing — PostgreSQL, `chroma run`, worker processes, kill -9 — is tests/integration/test_fleet.py.)"""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from graph.fleet import files
from memory import Database, DatabaseOpenError
from memory.fleet import FleetError, check_name, schema_of
from tests.conftest import make_agent
from web.context import PersonaPrefix


def test_a_persona_name_is_a_safe_schema_name():
    assert schema_of("ada_2") == "persona_ada_2"
    for bad in ("", "Ada", "2ada", "ada-b", "a" * 41, 'ada"; drop table notes; --'):
        with pytest.raises(FleetError, match="lowercase letters"):
            check_name(bad)


def test_a_persona_schema_needs_postgres(tmp_path):
    with pytest.raises(DatabaseOpenError, match="needs PostgreSQL"):
        Database.open(tmp_path, schema="persona_ada")


def test_persona_files_travel_as_one_archive_and_unpack_once_per_version(tmp_path):
    source = tmp_path / "nova"
    source.mkdir()
    (source / "IDENTITY.md").write_text("I am Nova.")
    (source / "skills" / "sea").mkdir(parents=True)
    (source / "skills" / "sea" / "SKILL.md").write_text("---\nname: sea\n---\nsail")
    packed, digest = files.pack(source)
    assert files.pack(source)[1] == digest  # the digest is of the files, not of the archive's times
    unpacked = files.materialize("nova", packed, digest, tmp_path / "cache")
    assert (unpacked / "IDENTITY.md").read_text() == "I am Nova."
    assert (unpacked / "skills" / "sea" / "SKILL.md").exists()
    assert files.materialize("nova", b"not used: already there", digest, tmp_path / "cache") == unpacked
    (source / "IDENTITY.md").write_text("I am Nova, changed.")
    packed2, digest2 = files.pack(source)
    assert digest2 != digest
    again = files.materialize("nova", packed2, digest2, tmp_path / "cache")
    assert (again / "IDENTITY.md").read_text() == "I am Nova, changed."
    assert not unpacked.exists()  # the older version of its files is gone from the cache


def test_each_persona_checkpoints_on_its_own_threads(tmp_path):
    agent = make_agent(tmp_path)
    assert agent.checkpoint_thread == "main"
    agent.checkpoint_prefix = "ada/"
    assert agent.checkpoint_thread == "ada/main"
    dreamer = agent.sibling(agent.playbook, "main")
    assert dreamer.checkpoint_thread == "ada/main" and dreamer.checkpointer is agent.checkpointer
    agent.tick()
    saved = {c.config["configurable"]["thread_id"] for c in agent.checkpointer.list(None)}
    assert saved == {"ada/main"}
    agent.close()


def _echo_app():
    async def echo(request):
        return JSONResponse(
            {
                "path": request.url.path,
                "root": request.scope.get("root_path"),
                "persona": request.scope.get("anima_persona"),
                "route": request.scope["route"].path,
            }
        )

    return PersonaPrefix(Starlette(routes=[Route("/", echo), Route("/talk/notes", echo, methods=["GET", "POST"])]))


def test_the_persona_prefix_keeps_the_routes_of_one_persona():
    client = TestClient(_echo_app())
    assert client.get("/p/ada/talk/notes").json() == {
        "path": "/p/ada/talk/notes",
        "root": "/p/ada",
        "persona": "ada",
        "route": "/talk/notes",
    }
    assert client.get("/p/ada/").json()["route"] == "/"
    redirected = client.get("/p/ada", follow_redirects=False)
    assert redirected.status_code == 307 and redirected.headers["location"] == "/p/ada/"
    assert client.get("/talk/notes").json()["persona"] is None  # a data dir's one persona: no prefix


def test_a_data_dir_app_says_the_personas_list_belongs_to_a_deployment(web):
    response = web.client.get("/api/personas")
    assert response.status_code == 404
    assert "run.py serve --db postgresql" in response.json()["error"]
