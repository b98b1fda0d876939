"""What every test shares: the fake-LLM agent and the web app over it, a copy of the persona, one PostgreSQL cluster
for the session — and how the suite runs: in parallel under pytest-xdist (`make test`: two workers, `--dist
loadgroup`), every integration module one group (its module-scoped servers start once, on one worker), each worker's
embedded model on its share of the CPUs, and the suite's own time printed at its end (docs/layout.md, "Tests")."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from graph.agent import Agent, build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from persona import default_persona_dir  # noqa: E402
from persona.settings import Overrides  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402


def make_agent(
    tmp_path: Path,
    *fakes: FakeLLM,
    playbook: str = "repl",
    validators: tuple[str, ...] = (),
    checkpointer="memory",
    trust: dict[str, float] | None = None,
    thread_id: str = "main",
    **overrides,
) -> Agent:
    fakes = fakes or (FakeLLM("fake"),)
    entries = [
        {
            "id": f.id,
            "provider": "fake",
            "priority": 100 - i,
            "is_validator": f.id in validators,
            "trust_score": (trust or {}).get(f.id, 1.0),
        }
        for i, f in enumerate(fakes)
    ]
    embedder = overrides.pop("embedder", None) or HashEmbedder()
    clock = overrides.pop("clock", None)
    services = open_services(
        data_dir=str(tmp_path),
        embedded=False,
        providers={f.id: f for f in fakes},
        entries=entries,
        embedder=embedder,
        **({"clock": clock} if clock else {}),
        **overrides,
    )
    return build_agent(
        playbook, services=services, data_dir=str(tmp_path), checkpointer=checkpointer, thread_id=thread_id
    )


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

    # the loop's controls are tried over ticks that think (quiet ticks have their own tests: test_thinking_cost.py)
    agent = make_agent(tmp_path, FakeLLM("fake"), cycle={"thinking": "continuous"})
    services = WebServices(
        db=agent.services.db,
        overrides=Overrides.of(data_dir=str(tmp_path)),
        clock=agent.services.clock,
        _memory=agent.services.memory,
    )
    app = create_app(services=services)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield SimpleNamespace(
            client=client,
            agent=agent,
            app=app,
            services=services,
            data_dir=tmp_path,
            csrf={"X-CSRF-Token": services.csrf_token, "Origin": "http://127.0.0.1"},
        )
    agent.services.db.close()


@pytest.fixture
def persona(tmp_path):
    """A copy of the default persona to change freely."""
    target = tmp_path / "persona"
    shutil.copytree(default_persona_dir(), target)
    return target


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """One throwaway PostgreSQL cluster for the session (per xdist worker): `postgres.database(prefix)` makes a new,
    empty database on it and gives its URL — a module's or a test's own, so nothing is shared but the server."""
    from types import SimpleNamespace

    from sqlalchemy import create_engine, text

    from tests.integration.servers import postgres_server

    names = itertools.count(1)
    with postgres_server() as url:
        server = url.rsplit("/", 1)[0]
        admin = create_engine(url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")

        def database(prefix: str = "test") -> str:
            name = f"{prefix}_{next(names)}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            return f"{server}/{name}"

        try:
            yield SimpleNamespace(url=url, server=server, database=database)
        finally:
            admin.dispose()


@pytest.fixture
def no_anima_environment(monkeypatch):
    """None of the machine's ANIMA_* variables (a test that resolves settings sets its own)."""
    for name in list(os.environ):
        if name.upper().startswith("ANIMA_"):
            monkeypatch.delenv(name)


# ---- how the suite runs -------------------------------------------------------------------------------------------


def pytest_configure(config):
    """A worker among several computes its embedded model on its share of the CPUs: llama.cpp's threads wait for each
    other by spinning, so two workers' models on every core each run several times slower than on one core each
    (the run.py processes a test starts inherit the variable)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers > 1:
        from llm.providers.llamacpp import available_cpus

        os.environ.setdefault("ANIMA_EMBEDDED_THREADS", str(max(1, available_cpus() // workers)))
    config._anima_started = time.monotonic()  # type: ignore[attr-defined]


# integration modules whose fixtures are cheap to start on each worker: their tests go one by one, not as one group
SPREAD = {"tests/integration/test_web_api_fuzz.py"}


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` as this suite groups: every integration module is one group — its tests run on one worker,
    so its module-scoped servers and models start once — except the SPREAD ones; a unit test goes alone to whichever
    worker is free. (xdist's own loadgroup reads `xdist_group` marks by suffixing the test's nodeid, which pytest 9
    no longer takes: its groups would be ignored.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.startswith("tests/integration/") and path not in SPREAD else nodeid

    return ModuleGroups(config, log)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The suite's own time, last: wall clock, and the tests' phases summed (what one worker alone would take)."""
    started = getattr(config, "_anima_started", None)
    if started is None or hasattr(config, "workerinput"):  # a worker's summary is not shown
        return
    phases: dict[tuple[str, str], float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) and hasattr(report, "duration"):
                key = (report.nodeid, report.when)
                phases[key] = max(phases.get(key, 0.0), report.duration)
    workers = getattr(config.option, "numprocesses", None) or 1
    wall = time.monotonic() - started
    terminalreporter.write_line(
        f"anima suite time: {wall:,.0f} s wall ({wall / 60:.1f} min) on {workers} worker(s); "
        f"the tests' own time summed {sum(phases.values()):,.0f} s"
    )
