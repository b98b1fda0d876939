"""The same storage code on a real PostgreSQL server (no SQLite-only SQL)."""

import pytest
from sqlalchemy import text

from graph.agent import build_agent
from graph.services import RunOptions, open_services
from llm.testing import FakeLLM
from memory import SCHEMA_VERSION, Database
from tests.integration.servers import postgres_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


def test_schema_and_repositories_on_postgres(pg_url):
    db = Database.open(url=pg_url)
    assert db.engine.dialect.name == "postgresql"
    with db.session() as s:
        assert s.execute(text("SELECT version FROM schema_version")).scalar_one() == SCHEMA_VERSION
    with db.unit() as repos:
        repos.notes.add("hello from postgres", source="user", priority=2, tags=["pg"])
        repos.config.set("cycle/main", {"pause_s": 1.5})
    with db.unit() as repos:
        assert [n.text for n in repos.notes.unread_incoming()] == ["hello from postgres"]
        assert repos.notes.count_unread_by_priority() == {2: 1}
        assert repos.config.get("cycle/main") == {"pause_s": 1.5}
    db.close()


def test_ticks_with_commands_on_postgres(tmp_path, pg_url):
    fake = FakeLLM("fake", responses=['Hi.\n# Commands:\n[{"type": "messages.send", "args": {"text": "hello"}},'
                                      ' {"type": "llm_memory.add", "args": {"text": "pg works"}}]\n# End commands',
                                      "Another thought entirely."])
    services = open_services(RunOptions(data_dir=str(tmp_path), db_url=pg_url, embedded=False),
                             providers={"fake": fake}, entries=[{"id": "fake", "provider": "fake", "priority": 1}])
    agent = build_agent("repl", services=services, data_dir=str(tmp_path), thread_id="pg-thread")
    agent.tick()
    state = agent.tick()
    assert state["tick"] == 2
    with services.db.unit() as repos:
        assert [c.status for c in repos.commands.recent(10)] == ["executed", "executed"]
        assert [n.text for n in repos.notes.list(source="llm")] == ["hello"]
        assert repos.llm_calls.totals("pg-thread")["calls"] == 4
        assert [t.status for t in repos.ticks.recent(5, "pg-thread")] == ["ok", "ok"]
        assert repos.llm_calls.by_model()[0]["calls"] >= 2
    agent.close()
