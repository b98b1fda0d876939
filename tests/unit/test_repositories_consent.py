"""The consent tables (approvals, audit log) and the v7 migration that adds them, on SQLite and PostgreSQL.

The PostgreSQL runs give each test a database of its own on the session's throwaway cluster (tests/conftest.py's
`postgres`); they are marked `integration`.
"""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, text

from memory import SCHEMA_VERSION, Database
from memory.repositories import NotFound

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def db_url(request, tmp_path):
    """A URL of an empty database: a SQLite file, or a new database on the throwaway PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'anima.sqlite'}"
    return request.getfixturevalue("postgres").database("consent")  # the session's cluster (tests/conftest.py)


@pytest.fixture
def db(db_url):
    database = Database.open(url=db_url)
    yield database
    database.close()


def ask(repos, key: str, args: dict | None = None, root_thread: str = "main", **fields):
    return repos.approvals.request(
        cmd_key=key,
        thread_id=key.split(":")[0],
        root_thread=root_thread,
        tick=1,
        cmd_id=key.rsplit(":", 1)[-1],
        type="files.write",
        args=args if args is not None else {"path": "a.txt", "text": "hi"},
        effect="external",
        description="write a file",
        reason="touches the world",
        **fields,
    )


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)  # SQLite's are naive


# ---- approvals ---------------------------------------------------------------------------------------------


def test_a_request_is_made_once_per_command_and_once_per_pending_request(db):
    with db.unit() as repos:
        first, created = ask(repos, "main:1:a")
        again, created_again = ask(repos, "main:1:a")  # the same command, re-run after a kill
        same, folded = ask(repos, "main:2:b", {"text": "hi", "path": "a.txt"})  # the same request, keys reordered
        other, other_created = ask(repos, "main:2:c", {"path": "b.txt", "text": "hi"})
        assert (created, created_again, folded, other_created) == (True, False, False, True)
        assert again.id == same.id == first.id != other.id
        assert (first.status, first.effect, first.root_thread) == ("pending", "external", "main")
    with db.unit() as repos:
        repos.approvals.decide(first.id, "denied", "human", "not now", NOW)
        renewed, created = ask(repos, "main:3:d")  # nothing identical is pending any more
        assert created and renewed.id != first.id


def test_a_request_names_a_known_effect_and_starts_pending(db):
    with db.unit() as repos:
        with pytest.raises(ValueError, match="effect must be one of read, write_self, modify_self, external"):
            repos.approvals.request(cmd_key="k", thread_id="main", root_thread="main", type="x", effect="everything")
        with pytest.raises(ValueError, match="starts pending"):
            ask(repos, "main:1:a", status="approved")


def test_decisions_are_made_once_from_pending(db):
    with db.unit() as repos:
        row, _ = ask(repos, "main:1:a")
    with db.unit() as repos:
        decided = repos.approvals.decide(row.id, "approved", "human", "fine", NOW)
        assert (decided.status, decided.decided_by, decided.decision_reason) == ("approved", "human", "fine")
        assert as_utc(decided.decided_at) == NOW
    with db.unit() as repos:
        with pytest.raises(ValueError, match=f"approval {row.id} is approved, not pending"):
            repos.approvals.decide(row.id, "denied", "human", "changed my mind", NOW)
        with pytest.raises(ValueError, match="a decision must be one of approved, denied, expired"):
            repos.approvals.decide(row.id, "executed", "human", "", NOW)
        with pytest.raises(NotFound):
            repos.approvals.decide(9999, "denied", "human", "", NOW)
        assert repos.approvals.get(row.id).status == "approved" and repos.approvals.get(9999) is None


def test_listing_pending_recent_approved_and_newly_decided(db):
    with db.unit() as repos:
        ids = [ask(repos, f"main:{n}:a", {"n": n})[0].id for n in range(4)]
        child, _ = ask(repos, "child:1:a", {"n": "child"}, root_thread="other")
    with db.unit() as repos:
        repos.approvals.decide(ids[1], "approved", "human", "", NOW)
        repos.approvals.decide(ids[2], "denied", "human", "", NOW + timedelta(minutes=1))
        repos.approvals.decide(child.id, "approved", "human", "", NOW + timedelta(minutes=2))
    with db.unit() as repos:
        assert [a.id for a in repos.approvals.pending()] == [ids[0], ids[3]]
        assert [a.id for a in repos.approvals.pending(limit=1)] == [ids[0]]
        assert [a.id for a in repos.approvals.list()] == [child.id, *reversed(ids)]
        assert [a.id for a in repos.approvals.list(status="approved", limit=1)] == [child.id]
        assert [a.id for a in repos.approvals.approved_unexecuted()] == [ids[1], child.id]
        assert [a.id for a in repos.approvals.approved_unexecuted(root_thread="main")] == [ids[1]]
        assert [a.id for a in repos.approvals.decided_since(NOW)] == [ids[2], child.id]
        assert repos.approvals.decided_since(NOW + timedelta(minutes=2)) == []


def test_an_approved_command_is_marked_run_exactly_once(db):
    with db.unit() as repos:
        first, _ = ask(repos, "main:1:a", {"n": 1})
        second, _ = ask(repos, "main:1:b", {"n": 2})
        assert not repos.approvals.mark_executed(first.id, "too early", NOW)  # not approved yet
        repos.approvals.decide(first.id, "approved", "human", "", NOW)
        repos.approvals.decide(second.id, "approved", "human", "", NOW)
    with db.unit() as repos:
        stale = repos.approvals.get(first.id)  # another process read it as approved …
    with db.unit() as repos:
        assert repos.approvals.mark_executed(first.id, "wrote 2 bytes", NOW)  # … but this one ran it first
    with db.unit() as repos:
        assert stale.status == "approved" and not repos.approvals.mark_executed(stale.id, "again", NOW)
        assert not repos.approvals.mark_failed(stale.id, "again", NOW)
        assert repos.approvals.mark_failed(second.id, "disk full", NOW)
        assert [(a.status, a.result) for a in (repos.approvals.get(first.id), repos.approvals.get(second.id))] == [
            ("executed", "wrote 2 bytes"),
            ("failed", "disk full"),
        ]
        assert repos.approvals.approved_unexecuted() == []


def test_two_processes_racing_to_run_an_approval_one_wins(db):
    with db.unit() as repos:
        row, _ = ask(repos, "main:1:a")
        repos.approvals.decide(row.id, "approved", "human", "", NOW)
    first_marked, won = threading.Event(), {}

    def first():
        with db.unit() as repos:
            won["first"] = repos.approvals.mark_executed(row.id, "first", NOW)
            first_marked.set()
            threading.Event().wait(0.3)  # still uncommitted while the second one tries

    def second():
        first_marked.wait(10)
        with db.unit() as repos:
            won["second"] = repos.approvals.mark_executed(row.id, "second", NOW)  # waits for the first's commit

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert won == {"first": True, "second": False}
    with db.unit() as repos:
        assert repos.approvals.get(row.id).result == "first"


# ---- audit log ---------------------------------------------------------------------------------------------


def test_the_audit_log_keeps_every_step_of_a_request(db):
    with db.unit() as repos:
        row, _ = ask(repos, "main:1:a")
        for decision, actor in (("requested", "policy"), ("approved", "human"), ("executed", "loop")):
            repos.audit.add(
                thread_id="main",
                tick=1,
                cmd_key="main:1:a",
                type="files.write",
                effect="external",
                decision=decision,
                actor=actor,
                reason=f"{decision} by {actor}",
                approval_id=row.id,
            )
        repos.audit.add(
            thread_id="child",
            tick=2,
            type="diary.add",
            effect="write_self",
            decision="auto_approved",
            actor="auto_pass",
        )
        with pytest.raises(ValueError, match="decision must be one of requested"):
            repos.audit.add(thread_id="main", decision="shrugged", actor="human")
        with pytest.raises(ValueError, match="actor must be one of human"):
            repos.audit.add(thread_id="main", decision="denied", actor="the cat")
    with db.unit() as repos:
        assert [e.decision for e in repos.audit.for_approval(row.id)] == ["requested", "approved", "executed"]
        assert [e.decision for e in repos.audit.recent(2)] == ["executed", "auto_approved"]
        assert [e.actor for e in repos.audit.recent(thread_id="main")] == ["policy", "human", "loop"]
        assert repos.audit.for_approval(9999) == []


# ---- the v7 migration --------------------------------------------------------------------------------------


def test_a_v6_database_migrates_to_v7_keeping_its_goals_and_tasks(db_url):
    db = Database.open(url=db_url)
    with db.unit() as repos:
        goal = repos.goals.add("Learn the tides", tags=["sea"])
        task = repos.tasks.add("Read the tide tables", goal_id=goal.id)
    with db.engine.begin() as conn:  # back to v6: no consent tables, no archived_at
        conn.execute(text("DROP TABLE approvals"))
        conn.execute(text("DROP TABLE audit_log"))
        conn.execute(text("DROP INDEX ix_notes_source_created"))
        for table in ("goals", "tasks"):
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN archived_at"))
        conn.execute(text("UPDATE schema_version SET version = 6"))
    db.close()

    db = Database.open(url=db_url)
    with db.session() as s:
        assert s.execute(text("SELECT version FROM schema_version")).scalar_one() == SCHEMA_VERSION
        schema = inspect(s.bind)
        assert {"approvals", "audit_log"} <= set(schema.get_table_names())
        assert all("archived_at" in {c["name"] for c in schema.get_columns(t)} for t in ("goals", "tasks"))
        assert "ix_notes_source_created" in {i["name"] for i in schema.get_indexes("notes")}
    with db.unit() as repos:
        assert [(g.title, g.tags, g.archived_at) for g in repos.goals.list()] == [("Learn the tides", ["sea"], None)]
        assert [(t.title, t.goal_id) for t in repos.tasks.list()] == [("Read the tide tables", goal.id)]
        assert repos.archive("task", task.id, NOW) and repos.tasks.list() == []
        assert ask(repos, "main:1:a")[1]
    db.close()
    Database.open(url=db_url).close()  # opening a v7 database again changes nothing
