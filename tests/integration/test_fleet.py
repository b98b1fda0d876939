"""Many personas on real parts: a PostgreSQL cluster (initdb/pg_ctl), a `chroma run` server, `run.py worker`
processes and a scripted model server. Two workers run six personas; one is killed with -9 mid-tick."""

from __future__ import annotations

import re
import time
from datetime import UTC

import pytest
from sqlalchemy import func, select, text

from graph.fleet.personas import Deployment
from memory.fleet import Fleet, schema_of
from memory.models import Base, DiaryEntry, ExecutedCommand, Note, Tick
from persona.settings import Overrides
from tests.integration.fleet_parts import THOUGHT, Workers, anima, schemas_seen, wait_until, write_persona

pytestmark = pytest.mark.integration
NAMES = [f"p{i}" for i in range(6)]
TAKEOVER_LIMIT_S = 30


@pytest.fixture(scope="module")
def pg_url(postgres):
    """A database of this module's own on the session's PostgreSQL cluster (tests/conftest.py)."""
    return postgres.database("fleet")


def _ticks_of(fleet: Fleet) -> dict[str, int]:
    with fleet.registry() as registry:
        return {entry.name: entry.ticks for entry in registry.list()}


def _in_flight(log: str) -> tuple[int, str] | None:
    """The job a worker started and has not ended (its log: procrastinate's start and end lines)."""
    started = {
        int(m.group(1)): m.group(2) for m in re.finditer(r"Starting job anima\.tick\[(\d+)\]\(name='(\w+)'", log)
    }
    ended = {int(m) for m in re.findall(r"Job anima\.\w+\[(\d+)\]\([^)]*\) ended", log)}
    waiting = sorted(set(started) - ended)
    return (waiting[-1], started[waiting[-1]]) if waiting else None


@pytest.fixture(scope="module")
def deployment_run(pg_url, chroma_url, scripted_server, tmp_path_factory):
    """Six personas on two workers; worker 0 killed with -9 in the middle of a tick; notes before and after."""
    base = tmp_path_factory.mktemp("fleet")
    persona = write_persona(base / "tester", pause_s=0.2)
    scripted_server.script(default={"do": "stream", "text": THOUGHT, "delay_s": 0.3}, record=False)
    for name in NAMES:
        added = anima("personas", "add", name, "--db", pg_url, "--persona", str(persona))
        assert added.returncode == 0, added.stderr
    fleet = Fleet.open(pg_url)
    deployment = Deployment.open(pg_url)
    cache = base / "cache"
    cache.mkdir()
    facts: dict = {"notes": {name: [] for name in NAMES}}
    try:
        with Workers(pg_url, chroma_url, scripted_server.url, cache) as workers:
            workers.start()
            workers.start()
            wait_until(lambda: min(_ticks_of(fleet).values()) >= 2, 180, "every persona ticks twice")
            said = anima("say", "a note from the command line", "--name", "p0", "--db", pg_url)
            assert said.returncode == 0, said.stderr
            facts["notes"]["p0"].append("a note from the command line")
            for name in NAMES:
                _note(fleet, deployment, name, f"before the kill, to {name}")
                facts["notes"][name].append(f"before the kill, to {name}")
            victim = wait_until(lambda: _in_flight(workers.log(0)), 60, "worker 0 in the middle of a tick", every=0.05)
            at_kill = _ticks_of(fleet)
            workers.kill(0)
            killed_at = time.monotonic()
            for name in NAMES:  # written while the dead worker's job is still `doing`
                _note(fleet, deployment, name, f"after the kill, to {name}")
                facts["notes"][name].append(f"after the kill, to {name}")
            wait_until(
                lambda: _ticks_of(fleet)[victim[1]] > at_kill[victim[1]],
                TAKEOVER_LIMIT_S,
                f"{victim[1]} (its job {victim[0]} was on the killed worker) ticks again",
            )
            facts["takeover_s"] = time.monotonic() - killed_at
            wait_until(
                lambda: all(t >= at_kill[n] + 2 for n, t in _ticks_of(fleet).items()),
                60,
                "every persona ticks on the surviving worker",
            )
            wait_until(lambda: all(_all_read(fleet, name) for name in NAMES), 60, "every note is read")
            facts["victim"], facts["survivor_log"] = victim, workers.log(1)
            # a knowledge-base upload and a session export, each a job of its persona on the surviving worker
            document = base / "harbour.md"
            document.write_text("# The harbour\n\nThe lighthouse keeper counts forty-two boats every evening.\n")
            facts["kb_add"] = anima("kb", "add", str(document), "--name", "p2", "--db", pg_url, timeout=180)
            sessions = anima("sessions", "list", "--name", "p1", "--db", pg_url, "--json")
            facts["session"] = __import__("json").loads(sessions.stdout)[0]
            facts["export"] = anima(
                "sessions",
                "export",
                str(facts["session"]["id"]),
                "--name",
                "p1",
                "--db",
                pg_url,
                "--out",
                str(base / "exports"),
                timeout=180,
            )
            facts["exports"] = base / "exports"
        facts["rows"] = {name: _rows(fleet, name) for name in NAMES}
        with fleet.engine.connect() as conn:
            facts["checkpoint_threads"] = {
                row[0] for row in conn.execute(text("SELECT DISTINCT thread_id FROM checkpoints"))
            }
        facts["files"] = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
        yield facts
    finally:
        deployment.close()
        fleet.close()


def _note(fleet: Fleet, deployment: Deployment, name: str, text_: str) -> None:
    database = fleet.database(name)
    try:
        with database.unit() as repos:
            repos.notes.add(text_, source="user")
    finally:
        database.close()
    deployment.wake(name)


def _all_read(fleet: Fleet, name: str) -> bool:
    database = fleet.database(name)
    try:
        with database.session() as session:
            return not session.scalar(
                select(func.count()).select_from(Note).where(Note.source.in_(["user", "cli"]), Note.read.is_(False))
            )
    finally:
        database.close()


def _rows(fleet: Fleet, name: str) -> dict:
    database = fleet.database(name)
    try:
        with database.session() as session:
            ticks = [
                (t.tick, t.started_at, t.finished_at, t.status)
                for t in session.scalars(select(Tick).where(Tick.thread_id == "main").order_by(Tick.tick)).all()
            ]
            diary = list(session.scalars(select(DiaryEntry.text)).all())
            commands = [(c.cmd_key, c.status) for c in session.scalars(select(ExecutedCommand)).all()]
            notes = {
                n.text: n.read for n in session.scalars(select(Note).where(Note.source.in_(["user", "cli"]))).all()
            }
        return {"ticks": ticks, "diary": diary, "commands": commands, "notes": notes}
    finally:
        database.close()


def test_every_persona_advances_and_never_runs_two_ticks_at_once(deployment_run):
    for name, rows in deployment_run["rows"].items():
        finished = [t for t in rows["ticks"] if t[2] is not None]
        assert len(finished) >= 4, (name, rows["ticks"])
        spans = sorted((start.astimezone(UTC), end.astimezone(UTC)) for _, start, end, _ in finished)
        for (_, end), (next_start, _) in zip(spans, spans[1:]):
            assert end <= next_start, f"{name}: a tick started at {next_start} before the one before ended at {end}"


def test_a_killed_workers_personas_continue_on_the_other_with_nothing_lost_or_doubled(deployment_run):
    job_id, name = deployment_run["victim"]
    assert deployment_run["takeover_s"] <= TAKEOVER_LIMIT_S
    recovered = re.search(
        rf"job {job_id} \(anima\.tick {name}\) of a stopped worker goes back to the queue|"
        rf"job {job_id} of a stopped worker closed",
        deployment_run["survivor_log"],
    )
    assert recovered, "the surviving worker did not recover the killed worker's job"
    for persona, rows in deployment_run["rows"].items():
        assert rows["notes"] == {text_: True for text_ in deployment_run["notes"][persona]}  # every note, read
        assert len(rows["diary"]) == len(set(rows["diary"])), f"{persona}: a diary.add ran twice"
        executed = [key for key, status in rows["commands"] if status == "executed"]
        assert len(executed) == len(set(executed)) == len(rows["diary"])


def test_knowledge_base_indexing_and_session_export_are_jobs_of_their_persona(deployment_run, pg_url, chroma_url):
    from memory.retrieval.embeddings import LocalEmbedder
    from memory.retrieval.index import MemoryIndex, Query

    assert deployment_run["kb_add"].returncode == 0, deployment_run["kb_add"].stderr
    assert "indexed" in deployment_run["kb_add"].stderr
    fleet = Fleet.open(pg_url)
    database = fleet.database("p2")
    try:
        with database.unit() as repos:
            assert [d.path.endswith("harbour.md") for d in repos.kb.list()] == [True]
        index = MemoryIndex(database, LocalEmbedder(), chroma_url=chroma_url, chroma_database=schema_of("p2"))
        stored = index.collection.get(include=["metadatas"])  # what the worker wrote to p2's own vector database
        assert {m["tier"] for m in stored["metadatas"]} >= {"kb"}
        assert any(hit.item.tier == "kb" for hit in index.search(Query(text="lighthouse keeper boats", k=5)))
    finally:
        database.close()
        fleet.close()
    assert deployment_run["export"].returncode == 0, deployment_run["export"].stderr
    session_id = deployment_run["session"]["id"]
    exported = __import__("json").loads((deployment_run["exports"] / f"session-{session_id}.json").read_text())
    assert exported["session"]["thread_id"] == "main" and exported["messages"]
    assert "Thought" in (deployment_run["exports"] / f"session-{session_id}.md").read_text()


def test_checkpoints_of_every_persona_are_in_postgres_and_nothing_durable_on_disk(deployment_run):
    assert {f"{name}/main" for name in NAMES} <= deployment_run["checkpoint_threads"]
    assert not [f for f in deployment_run["files"] if f.endswith((".sqlite", ".sqlite3", ".db")) or "/chroma/" in f], (
        deployment_run["files"]
    )


def test_a_worker_refuses_the_embedded_chroma():
    done = anima("worker", "--db", "postgresql://nobody@127.0.0.1:1/none", timeout=60)
    assert done.returncode == 2
    assert "not safe across processes" in done.stderr + done.stdout and "chroma run" in done.stderr + done.stdout


def test_personas_pause_resume_and_remove(pg_url, chroma_url, tmp_path):
    deployment = Deployment.open(pg_url)
    try:
        deployment.add("solo", write_persona(tmp_path / "solo"))
        assert [j["task"] for j in deployment.scheduler.pending("solo")] == ["anima.tick"]  # a wake tick waits
        assert deployment.pause("solo").state == "paused"
        assert deployment.scheduler.pending("solo") == []  # what waited is cancelled
        assert deployment.resume("solo").state == "active"
        assert len(deployment.scheduler.pending("solo")) == 1
        listed = anima("personas", "list", "--db", pg_url, "--json")
        assert any(
            row["name"] == "solo" and row["state"] == "active" for row in __import__("json").loads(listed.stdout)
        )
        removed = anima("personas", "remove", "solo", "--db", pg_url, "--purge", "--chroma-url", chroma_url)
        assert removed.returncode == 0, removed.stderr
        with deployment.fleet.registry() as registry:
            assert registry.get("solo") is None
            assert not registry.has_table(f"{schema_of('solo')}.notes")
        assert deployment.scheduler.pending("solo") == []
    finally:
        deployment.close()


def test_every_table_of_a_persona_is_in_its_own_schema(pg_url):
    fleet = Fleet.open(pg_url)
    try:
        for name in ("iso_a", "iso_b"):
            fleet.database(name).close()
        with fleet.engine.connect() as conn:
            tables = {
                (row[0], row[1])
                for row in conn.execute(
                    text(
                        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE 'persona_iso_%'"  # noqa: E501
                    )
                )
            }
        for table in Base.metadata.tables:
            assert ("persona_iso_a", table) in tables and ("persona_iso_b", table) in tables
    finally:
        fleet.close()


SECRET = "SECRET-OF-A the heron fishes at the old pier"


def _populate(repos, secret: str) -> None:
    """One row in every memory tier a persona's commands write (and their retrieval items)."""
    repos.notes.add(secret, source="user", tags=["secret"])
    repos.diary.add(secret, tags=["secret"])
    repos.llm_memory.add(secret)
    goal = repos.goals.add(secret)
    repos.tasks.add(secret, goal_id=goal.id)
    one, two = repos.concepts.add(secret), repos.concepts.add(secret + " (2)")
    repos.links.add(one.id, two.id)
    repos.entities.merge(secret, kind="animal", facts=[secret])
    repos.episodes.upsert("day", "2026-11-20", secret)
    repos.insights.add(secret, strategy=secret)
    repos.facts.add(secret, confidence=0.4)
    repos.questions.add(secret)
    repos.blocks.write("core_memory", secret)
    repos.emotion_log.add("joy", snippet=secret)
    repos.abstracts.add(secret, secret)
    repos.config.set("secret", secret)


def _persona_services(fleet, name, tmp_path, chroma_url, responses):
    from graph.services import open_services
    from tests.fakes.llm import FakeLLM
    from tests.fakes.memory import HashEmbedder

    fake = FakeLLM("fake", responses=responses)
    return open_services(
        db=fleet.database(name),
        data_dir=str(tmp_path / name),
        persona_dir=str(write_persona(tmp_path / f"{name}-persona")),
        chroma_url=chroma_url,
        embedded=False,
        providers={"fake": fake},
        entries=[{"id": "fake", "provider": "fake", "priority": 1}],
        embedder=HashEmbedder(),
    ), fake


def test_a_persona_cannot_read_or_write_another_personas_rows_or_vectors(pg_url, chroma_url, tmp_path):
    """Through every repository (its SQL runs in its own schema alone, as PostgreSQL itself says, and names no
    schema), its tables, its vectors and its commands."""
    import inspect as pyinspect

    from graph.agent import build_agent
    from memory.repositories import Repos
    from memory.retrieval.index import Query

    fleet = Fleet.open(pg_url)
    a, _ = _persona_services(
        fleet,
        "iso_a",
        tmp_path,
        chroma_url,
        [
            'Noted.\n# Commands:\n[{"type": "diary.add", "args": {"text": "'
            + SECRET
            + ' (by command)"}}]\n# End commands'
        ],
    )
    b, fake_b = _persona_services(
        fleet,
        "iso_b",
        tmp_path,
        chroma_url,
        [
            'Looking.\n# Commands:\n[{"type": "memory.search", "args": {"query": "heron old pier"}},'
            ' {"type": "diary.list", "args": {}}, {"type": "notes.list", "args": {}}]\n# End commands'
        ],
    )
    try:
        build_agent("repl", services=a, checkpointer="memory", checkpoint_prefix="iso_a/").tick()
        with a.db.unit() as repos:
            _populate(repos, SECRET)
        a.memory.sync(flush=True)
        assert any(SECRET in hit.item.text for hit in a.memory.search(Query(text="heron old pier", k=10)))
        if a.memory.caches.warmup is not None:  # A's own background copy of its vectors: not B's statements
            a.memory.caches.warmup.join(timeout=60)

        results, called = [], []
        with schemas_seen(fleet.engine) as seen:
            with b.db.session() as session:
                repos = Repos(session)
                for attribute in [
                    n for n, v in vars(Repos).items() if isinstance(v, __import__("functools").cached_property)
                ]:
                    repo = getattr(repos, attribute)
                    for method_name, method in pyinspect.getmembers(repo, pyinspect.ismethod):
                        parameters = list(pyinspect.signature(method).parameters.values())
                        if method_name.startswith("_") or any(
                            p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
                        ):
                            continue
                        try:
                            with session.begin_nested():
                                results.append(repr(method()))
                                called.append(f"{attribute}.{method_name}")
                        except Exception as exc:  # noqa: BLE001 - a method that needs data it has not: still its SQL
                            results.append(repr(exc))
                session.rollback()
        assert len(called) >= 40, called  # list, recent, count, all, … of every repository
        tables = set(Base.metadata.tables)
        touching = [
            (s, schemas) for s, schemas in seen if any(f'"{t}"' in s or f" {t} " in s or f" {t}\n" in s for t in tables)
        ]
        assert len(touching) >= 40 and all(schemas == ["persona_iso_b"] for _, schemas in touching), [
            t for t in touching if t[1] != ["persona_iso_b"]
        ][:3]
        assert not any("persona_" in s for s, _ in seen)  # no statement names a schema: the connection's is its own
        assert not any("SECRET-OF-A" in r for r in results)

        holding = {"iso_a": set(), "iso_b": set()}  # the tables whose rows carry A's secret, in each schema
        for name, services in (("iso_a", a), ("iso_b", b)):
            with services.db.session() as session:
                for table in Base.metadata.sorted_tables:
                    if any("SECRET-OF-A" in repr(tuple(row)) for row in session.execute(select(table))):
                        holding[name].add(table.name)
        assert len(holding["iso_a"]) >= 15 and holding["iso_b"] == set(), holding

        b.memory.sync(flush=True)
        assert not any("SECRET-OF-A" in hit.item.text for hit in b.memory.search(Query(text="heron old pier", k=10)))
        assert b.memory.collection.count() == 0  # its own database on the Chroma server holds nothing of A's
        build_agent("repl", services=b, checkpointer="memory", checkpoint_prefix="iso_b/").tick()
        with b.db.unit() as repos:
            commands = repos.commands.recent(10)
            assert sorted(c.type for c in commands) == ["diary.list", "memory.search", "notes.list"]
            assert all(c.status == "executed" and "SECRET-OF-A" not in c.result for c in commands)
        with a.db.unit() as repos:
            assert repos.commands.recent(10)[0].type == "diary.add"  # A's own command, untouched by B's tick
    finally:
        for services in (a, b):
            services.memory.close()
            services.db.close()
        fleet.close()


def test_one_connection_goes_from_persona_to_persona_each_time_in_its_own_schema(pg_url):
    """The pool's one connection serves A, then B (whose first unit rolls back: the schema it was set to stays
    set), the registry, A again; each reads only its own rows. A unit whose connection is switched to another schema
    in the middle of its transaction is refused."""
    from sqlalchemy import event

    from memory.db import SEARCH_PATH, SearchPathError

    fleet = Fleet.open(pg_url, pool_size=1)
    a, b = fleet.database("one_a"), fleet.database("one_b")
    connections: set[int] = set()
    event.listen(fleet.engine, "checkout", lambda dbapi, *_: connections.add(id(dbapi)))
    try:
        with a.unit() as repos:
            repos.notes.add("a note of A", source="user")
        with pytest.raises(RuntimeError, match="undone"):
            with b.unit() as repos:
                repos.notes.add("a note of B, rolled back", source="user")
                raise RuntimeError("undone")
        with schemas_seen(fleet.engine) as seen, b.unit() as repos:
            assert repos.notes.list() == []
        assert seen and all(schemas == ["persona_one_b"] for _, schemas in seen)
        with schemas_seen(fleet.engine) as seen, fleet.registry() as registry:  # the default schema again
            assert isinstance(registry.list(), list)
        assert seen and all(schemas == ["public"] for _, schemas in seen)
        with schemas_seen(fleet.engine) as seen, a.unit() as repos:
            assert [note.text for note in repos.notes.list()] == ["a note of A"]
        assert seen and all(schemas == ["persona_one_a"] for _, schemas in seen)
        assert len(connections) == 1  # one connection went through every switch
        with a.engine.connect() as conn:
            conn.exec_driver_sql("SELECT count(*) FROM notes").scalar()
            conn.execution_options(**{SEARCH_PATH: "persona_one_b"})  # mid-transaction: A's snapshot, B's name
            with pytest.raises(SearchPathError, match="inside a transaction"):
                conn.exec_driver_sql("SELECT count(*) FROM notes")
    finally:
        a.close()
        b.close()
        fleet.close()


def test_units_in_a_shared_session_on_postgres_keep_their_own_transactions(pg_url):
    """A worker's job shares kept sessions among its units (memory/db.py): on PostgreSQL each unit still commits when
    it ends — one that only read included, so no kept connection waits in a transaction between units, holding a
    snapshot or a lock —, a failed unit rolls back only its own writes and its session is not taken again, a unit
    inside another has a session of its own, and `reading()` reads in autocommit."""
    fleet = Fleet.open(pg_url, pool_size=4)
    db = fleet.database("kept_units")

    def others_see() -> list[str]:  # another connection: only what was committed
        with fleet.registry() as registry:
            return list(
                registry.session.execute(text("SELECT text FROM persona_kept_units.notes ORDER BY id")).scalars()
            )

    def idle_in_transaction() -> int:  # this database's backends waiting inside a transaction
        with fleet.registry(each=True) as registry:
            return int(
                registry.session.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND state LIKE 'idle in transaction%'"
                    )
                ).scalar_one()
            )

    try:
        with db.shared_session():
            with db.unit() as repos:
                first = repos.session
                repos.notes.add("kept", source="user")
            assert others_see() == ["kept"] and idle_in_transaction() == 0
            with db.unit() as repos:
                assert repos.session is first and repos.notes.count() == 1  # a read only: committed all the same
            assert idle_in_transaction() == 0
            with pytest.raises(RuntimeError):
                with db.unit() as repos:
                    assert repos.session is first
                    repos.notes.add("lost", source="user")
                    raise RuntimeError("boom")
            with db.unit() as repos:
                assert repos.session is not first  # the failed unit's session was dropped, not taken again
                again = repos.session
                assert [n.text for n in repos.notes.list()] == ["kept"]
                with db.unit() as inner:
                    assert inner.session is not again
                    inner.notes.add("inner", source="user")
                assert others_see() == ["kept", "inner"]  # the inner unit committed on its own
            with db.reading() as repos:
                reader = repos.session
                assert reader is not again and repos.notes.count() == 2
                assert reader.connection().connection.dbapi_connection.autocommit
            with db.reading() as repos:
                assert repos.session is reader
            assert idle_in_transaction() == 0
        with db.unit() as repos:
            assert repos.session is not again  # outside the scope: a session per unit again
    finally:
        db.close()
        fleet.close()


def test_a_tick_job_follows_up_its_new_memories_itself(pg_url, chroma_url, scripted_server, tmp_path):
    """A worker's tick job follows up the memories the tick wrote (memory/followup.py) before its vectors go to
    Chroma, and defers no indexing job of their own."""
    from graph.fleet import jobs
    from graph.fleet.runtime import WorkerRuntime

    scripted_server.script(default={"do": "stream", "text": THOUGHT}, record=False)
    deployment = Deployment.open(pg_url)
    deployment.add("follow", write_persona(tmp_path / "follow"))
    fleet = deployment.fleet
    runtime = WorkerRuntime(
        fleet,
        Overrides.of(chroma_url=chroma_url, llm_url=scripted_server.url, model="scripted", embedded=False),
        scheduler=deployment.scheduler,
        cache_dir=str(tmp_path / "cache"),
    )
    try:
        with fleet.fence("follow"):
            assert runtime.tick("follow") is not None
        memory = runtime.persona("follow").services.memory
        with memory.db.reading() as reads:
            newest = reads.items.newest_id()
            assert newest >= 2 and reads.config.follow_up_cursor == newest  # the thought and its diary entry
            assert reads.diary.list(limit=5)  # (the scripted thought's command ran)
        assert memory.collection.count() == newest  # and their vectors are on the Chroma server
        assert [job["task"] for job in deployment.scheduler.pending("follow")] == [jobs.TICK]  # its wake tick only
        with fleet.fence("follow"):  # the next thought updates the first ("Thought 2: …" after "Thought 1: …")
            assert runtime.tick("follow") is not None
        with memory.db.reading() as reads:
            thoughts = [i for i in reads.items.after(0, 20) if i.text.startswith("Thought")]
            entries = [i for i in reads.items.after(0, 20) if i.text.startswith("entry")]
            assert reads.config.follow_up_cursor == reads.items.newest_id()
        assert [(t.status, (t.meta or {}).get("superseded_by")) for t in thoughts] == [
            ("superseded", thoughts[1].id),
            ("active", None),
        ]  # marked by the job's follow-up, chained
        assert [e.status for e in entries] == ["active", "active"]  # "entry 2" replaces nothing (no name, no frame)
    finally:
        runtime.close()
        deployment.close()


def mcp_posted_note(url: str, text: str) -> int:
    """A real MCP client session posts a note; the note's id."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def go() -> int:
        async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            return (await session.call_tool("post_note", {"text": text})).structuredContent["note_id"]

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_the_web_app_lists_every_persona_and_opens_any_with_its_live_stream(pg_url, chroma_url, tmp_path):
    """`run.py serve --db …` over a deployment: /personas, and each persona's pages, API and events under /p/<name>/."""
    import json
    import urllib.request

    from graph.loop.journal import LiveJournal
    from tests.integration.servers import free_port
    from web.server import start_in_thread

    deployment = Deployment.open(pg_url)
    for name in ("web_a", "web_b"):
        deployment.add(name, write_persona(tmp_path / name, name=name.replace("_", " ").title()))
    port = free_port()
    web = start_in_thread(Overrides.of(db_url=pg_url, chroma_url=chroma_url), "127.0.0.1", port)

    def get(path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"{web.url}{path}", timeout=20) as response:
            return response.status, response.read().decode()

    try:
        listing = json.loads(get("/api/personas")[1])["personas"]
        assert {"web_a", "web_b"} <= {p["name"] for p in listing}
        assert {p["display_name"] for p in listing if p["name"].startswith("web_")} == {"Web A", "Web B"}
        status, page = get("/")  # redirected to the list
        assert status == 200 and 'href="/p/web_a/"' in page and 'href="/p/web_b/"' in page
        status, talk = get("/p/web_b/")
        assert (
            status == 200
            and "Web B" in talk
            and 'href="/p/web_b/thoughts"' in talk
            and 'sse-connect="/p/web_b/live/talk"' in talk
        )
        posted = urllib.request.Request(
            f"{web.url}/p/web_b/api/notes",
            data=json.dumps({"text": "hello B"}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(posted, timeout=20) as response:
            assert response.status == 201
        assert [i["text"] for i in json.loads(get("/p/web_b/api/conversation")[1])["items"]] == ["hello B"]
        assert json.loads(get("/p/web_a/api/conversation")[1])["items"] == []  # B's note is B's alone
        wait_until(
            lambda: any(j["priority"] == 10 for j in deployment.scheduler.pending("web_b")),
            10,
            "the note woke web_b (a wake tick waits for a worker)",
        )
        with urllib.request.urlopen(f"{web.url}/p/web_b/api/events", timeout=20) as stream:  # from now on
            database = deployment.fleet.database("web_b")
            journal = LiveJournal(database, "main")  # what a worker journals (and NOTIFYs) while web_b thinks
            journal.put("tick", node="execute_commands", data={"executed": 1}, tick=7)
            journal.close()
            database.close()
            lines = []
            while not any(line.startswith("data:") for line in lines):
                lines.append(stream.readline().decode().strip())
        event = json.loads(next(line for line in lines if line.startswith("data:"))[5:])
        assert (event["kind"], event["tick"], event["data"]) == ("tick", 7, {"executed": 1})
        assert mcp_posted_note(f"{web.url}/p/web_a/mcp", "hello A through MCP") >= 1  # each persona's MCP server
        assert [i["text"] for i in json.loads(get("/p/web_a/api/conversation")[1])["items"]] == ["hello A through MCP"]
        assert [i["text"] for i in json.loads(get("/p/web_b/api/conversation")[1])["items"]] == ["hello B"]
        try:
            get("/p/nobody/api/conversation")
            raise AssertionError("an unknown persona answered")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and "no persona 'nobody'" in exc.read().decode()
    finally:
        web.stop()
        deployment.close()


def test_a_fleet_personas_mesh_key_is_sealed_in_its_schema_and_the_same_on_every_machine(pg_url, tmp_path):
    """A deployment's persona gets its settings from `overrides_for` (as the web app and the workers do): its secret
    store is the sealed one, so two machines (two cache dirs) open the same key — its DID does not change with the
    worker — and the database holds only ciphertext; rotation and revocation are kept sealed; a worker with another
    deployment key is refused rather than given a new identity."""
    import base64

    from managers import ManagerDeps, Managers
    from memory.secrets import SecretStoreError
    from persona.settings import load_settings
    from reach.hmp.containers import encode

    key = base64.urlsafe_b64encode(bytes(range(32))).decode()
    deployment = Deployment.open(pg_url)
    try:
        deployment.add("sec_a")
        deployment.add("sec_b")

        def house_on(machine: str, name: str = "sec_a", secrets_key: str = key):
            settings = load_settings(
                overrides=deployment.overrides_for(
                    name, Overrides(secrets_key=secrets_key), cache_dir=str(tmp_path / machine)
                )
            )
            database = deployment.fleet.database(name)
            return database, settings

        def identity_on(machine: str, secrets_key: str = key) -> str:
            database, settings = house_on(machine, secrets_key=secrets_key)
            try:
                with database.unit() as repos:
                    return Managers(repos, ManagerDeps(settings=settings)).mesh.my_did()
            finally:
                database.close()

        did = identity_on("m1")
        assert identity_on("m2") == did  # another machine, the same persona, the same DID
        assert not list(tmp_path.rglob("identity.key"))  # no key file in any machine's data dir
        with deployment.fleet.engine.connect() as conn:
            rows = conn.execute(text(f"SELECT name, nonce, sealed FROM {schema_of('sec_a')}.sealed_secrets")).all()
            others = conn.execute(text(f"SELECT count(*) FROM {schema_of('sec_b')}.sealed_secrets")).scalar()
        assert [r.name for r in rows] == ["identity.key"] and others == 0
        assert b"PRIVATE KEY" not in bytes(rows[0].sealed) and len(bytes(rows[0].nonce)) == 12

        database, settings = house_on("m1")
        peer_db, peer_settings = house_on("m1", "sec_b")
        try:
            with database.unit() as repos:
                rotation = Managers(repos, ManagerDeps(settings=settings)).mesh.rotate()
            rotated = identity_on("m2")
            assert rotated != did and rotation["payload"]["new"] == rotated
            with peer_db.unit() as repos:  # a peer takes the rotation: the old DID is retired there
                peer = Managers(repos, ManagerDeps(settings=peer_settings)).mesh
                assert peer.receive(encode(rotation)).status == "accepted" and peer.is_revoked(did)
            with database.unit() as repos:
                revocation = Managers(repos, ManagerDeps(settings=settings)).mesh.revoke()
            assert revocation["sender"] == rotated and identity_on("m2") not in (did, rotated)
        finally:
            database.close()
            peer_db.close()
        with pytest.raises(SecretStoreError, match="another ANIMA_SECRETS_KEY"):
            identity_on("m3", secrets_key=base64.urlsafe_b64encode(b"\x01" * 32).decode())
    finally:
        deployment.close()


def test_a_deployments_pool_never_prepares_statements_on_the_server(pg_url):
    """Each persona's statements name its schema: psycopg would count them for preparing and rarely reuse one."""
    fleet = Fleet.open(pg_url)
    try:
        with fleet.engine.connect() as conn:
            assert conn.connection.dbapi_connection.prepare_threshold is None
            conn.execute(text("SELECT 1"))
    finally:
        fleet.close()
    from memory.db import create_db_engine

    single = create_db_engine(pg_url)  # one persona on PostgreSQL (run.py --db) keeps psycopg's default
    try:
        with single.connect() as conn:
            assert conn.connection.dbapi_connection.prepare_threshold == 5
    finally:
        single.dispose()


def test_a_worker_runs_no_tick_for_a_persona_with_nothing_to_think_about(pg_url, chroma_url, scripted_server, tmp_path):
    """A persona alone (`cycle.thinking: eventful`): its first job thinks, the next ones only look — no tick, no model
    call, a quiet line — each deferring the next look by a doubled pause; a human's note makes the next job think."""
    from sqlalchemy import select as sql_select

    from graph.fleet.runtime import WorkerRuntime
    from memory.models import ProcessLog

    scripted_server.script(default={"do": "stream", "text": THOUGHT})
    deployment = Deployment.open(pg_url)
    deployment.add("quiet", write_persona(tmp_path / "quiet", thinking="eventful"))
    fleet = deployment.fleet
    runtime = WorkerRuntime(
        fleet,
        Overrides.of(chroma_url=chroma_url, llm_url=scripted_server.url, model="scripted", embedded=False),
        scheduler=deployment.scheduler,
        cache_dir=str(tmp_path / "cache"),
    )
    try:
        with fleet.fence("quiet"):
            runtime.tick("quiet")  # the first after a start thinks
        asked = len(scripted_server.requests())
        assert asked >= 1 and _ticks_of(fleet)["quiet"] == 1
        delays = []
        for _ in range(2):
            with fleet.fence("quiet"):
                delays.append(runtime.tick("quiet"))
        assert delays == [1.0, 2.0] and len(scripted_server.requests()) == asked and _ticks_of(fleet)["quiet"] == 1
        database = fleet.database("quiet")
        with database.reading() as reads:
            quiet = reads.session.scalars(sql_select(ProcessLog).where(ProcessLog.name == "cycle.quiet")).all()
            assert len(quiet) == 2 and all(row.status == "close" for row in quiet)
        with database.unit() as repos:
            repos.notes.add("Are you there?", source="user")
        with fleet.fence("quiet"):
            runtime.tick("quiet")
        assert _ticks_of(fleet)["quiet"] == 2 and len(scripted_server.requests()) > asked
        assert any("Are you there?" in str(r["messages"]) for r in scripted_server.requests()[asked:])
    finally:
        runtime.close()
        deployment.close()
