from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from graph.agent import Agent, build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402
from persona import default_persona_dir  # noqa: E402
from persona.settings import Overrides  # noqa: E402


def make_agent(tmp_path: Path, *fakes: FakeLLM, playbook: str = "repl", validators: tuple[str, ...] = (),
               checkpointer="memory", trust: dict[str, float] | None = None, thread_id: str = "main",
               **overrides) -> Agent:
    fakes = fakes or (FakeLLM("fake"),)
    entries = [{"id": f.id, "provider": "fake", "priority": 100 - i, "is_validator": f.id in validators,
                "trust_score": (trust or {}).get(f.id, 1.0)} for i, f in enumerate(fakes)]
    embedder = overrides.pop("embedder", None) or HashEmbedder()
    clock = overrides.pop("clock", None)
    services = open_services(data_dir=str(tmp_path), embedded=False, providers={f.id: f for f in fakes}, entries=entries,
                             embedder=embedder, **({"clock": clock} if clock else {}), **overrides)
    return build_agent(playbook, services=services, data_dir=str(tmp_path), checkpointer=checkpointer,
                       thread_id=thread_id)


@pytest.fixture
def agent_factory(tmp_path):
    made: list[Agent] = []

    def factory(*fakes, **kwargs):
        agent = make_agent(tmp_path, *fakes, **kwargs)
        made.append(agent)
        return agent

    yield factory
    for agent in made:
        agent.services.db.close()


@pytest.fixture
def index(tmp_path):
    """A memory index on SQLite + a real Chroma PersistentClient, with the deterministic HashEmbedder."""
    from memory import Database
    from memory.retrieval.index import MemoryIndex

    db = Database.open(tmp_path)
    idx = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    yield idx
    idx.close()
    db.close()


@pytest.fixture
def web(tmp_path):
    """The web app over a persona that ticks on a FakeLLM: `web.client` (TestClient at http://127.0.0.1 — the app
    answers only to the names it is served as —, no browser headers: the CSRF check is for browsers), `web.agent`
    (tick it to make the loop write), `web.app`, `web.csrf` (the header a page sends)."""
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from web.app import create_app
    from web.context import WebServices

    agent = make_agent(tmp_path, FakeLLM("fake"))
    services = WebServices(db=agent.services.db, overrides=Overrides.of(data_dir=str(tmp_path)), clock=agent.services.clock,
                           _memory=agent.services.memory)
    app = create_app(services=services)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield SimpleNamespace(client=client, agent=agent, app=app, services=services, data_dir=tmp_path,
                              csrf={"X-CSRF-Token": services.csrf_token, "Origin": "http://127.0.0.1"})
    agent.services.db.close()


@pytest.fixture
def persona(tmp_path):
    """A copy of the default persona to change freely."""
    target = tmp_path / "persona"
    shutil.copytree(default_persona_dir(), target)
    return target


@pytest.fixture
def no_anima_environment(monkeypatch):
    """None of the machine's ANIMA_* variables (a test that resolves settings sets its own)."""
    for name in list(os.environ):
        if name.upper().startswith("ANIMA_"):
            monkeypatch.delenv(name)
