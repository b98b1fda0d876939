import sqlite3

import pytest
from sqlalchemy import inspect, text

from memory import SCHEMA_VERSION, Database, Repos, SchemaError


def test_schema_created_versioned_and_wal(tmp_path):
    db = Database.open(tmp_path)
    with db.session() as s:
        assert s.execute(text("SELECT version FROM schema_version")).scalar_one() == SCHEMA_VERSION
        assert s.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
    db.close()


def test_newer_schema_is_refused(tmp_path):
    Database.open(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "anima.sqlite")
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="newer than this anima"):
        Database.open(tmp_path)


def test_notes_round_trip_and_incoming_order(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        low = repos.notes.add("low", source="user", priority=0).id
        high = repos.notes.add("high", source="cli", priority=5).id
        repos.notes.add("mine", source="llm")
    with db.unit() as repos:
        assert [n.id for n in repos.notes.unread_incoming()] == [high, low]
        repos.notes.mark_read([high])
    with db.unit() as repos:
        assert [n.text for n in repos.notes.unread_incoming()] == ["low"]
        assert repos.notes.count_unread_by_priority() == {0: 1}
    db.close()


def test_transaction_rolls_back_on_error(tmp_path):
    db = Database.open(tmp_path)
    with pytest.raises(RuntimeError):
        with db.unit() as repos:
            repos.notes.add("lost", source="user")
            raise RuntimeError("boom")
    with db.unit() as repos:
        assert repos.notes.count() == 0
    db.close()


def other_connection_sees(tmp_path) -> list[str]:
    """The notes another process would see now (its own connection: only what was committed)."""
    conn = sqlite3.connect(tmp_path / "anima.sqlite")
    try:
        return [row[0] for row in conn.execute("SELECT text FROM notes ORDER BY id")]
    finally:
        conn.close()


def test_units_in_a_shared_session_keep_their_own_transactions(tmp_path):
    """A tick's units share one session (memory/db.py), and each still commits what it wrote when it ends, rolls
    back only its own writes when it fails, and leaves no lock between units: what a killed process had finished
    stays, as when every unit had a session of its own."""
    db = Database.open(tmp_path)
    with db.shared_session():
        with db.unit() as repos:
            first = repos.session
            note = repos.notes.add("kept", source="user")
        assert other_connection_sees(tmp_path) == ["kept"]  # committed at the unit's end
        assert inspect(note).detached  # what the unit loaded is detached, as a closed session leaves it
        with pytest.raises(RuntimeError):
            with db.unit() as repos:
                assert repos.session is first  # the same session, taken in turn
                repos.notes.add("lost", source="user")
                raise RuntimeError("boom")
        with db.unit() as repos:
            assert [n.text for n in repos.notes.unread_incoming()] == ["kept"]  # only the failed unit's write is gone
            with db.unit() as inner:  # a unit inside another: a session of its own, committed on its own
                assert inner.session is not first
                inner.notes.add("inner", source="user")
            assert other_connection_sees(tmp_path) == ["kept", "inner"]
        with db.reading() as repos:
            assert repos.session is first
            assert repos.notes.count() == 2
        # nothing held between units: another process writes at once (busy_timeout would make it wait)
        conn = sqlite3.connect(tmp_path / "anima.sqlite", timeout=0, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # the write lock, or "database is locked" at once
        conn.execute("ROLLBACK")
        conn.close()
        outside = Database.open(tmp_path)
        with outside.unit() as repos:
            repos.notes.add("from outside", source="cli")
        outside.close()
        with db.unit() as repos:
            assert repos.notes.count() == 3  # and the shared session sees it
    with db.unit() as repos:
        assert repos.session is not first  # outside the scope: a session per unit again
    db.close()


def test_a_core_statement_in_a_savepoint_is_undone_with_it(tmp_path):
    """A repository's Core statements reuse their transaction's connection (memory/repositories/base.py); a savepoint
    is a transaction of its own there, so what runs inside it goes when it is rolled back."""
    db = Database.open(tmp_path)
    call = dict(
        thread_id="main",
        tick=1,
        purpose="think",
        llm_id="fake",
        provider="fake",
        model="fake",
        prompt_tokens=1,
        completion_tokens=1,
        latency_ms=1.0,
        ok=True,
    )
    with db.session() as session:
        repos = Repos(session)
        repos.llm_calls.record(**call)  # the connection is now known to the repository layer
        savepoint = session.begin_nested()
        repos.llm_calls.record(**call)
        savepoint.rollback()
        assert repos.llm_calls.totals()["calls"] == 1
    db.close()


def test_message_upsert_is_idempotent(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.threads.ensure("main")
        first = repos.messages.upsert("main:1:response", thread_id="main", tick=1, content="a").id
        second = repos.messages.upsert("main:1:response", thread_id="main", tick=1, content="b").id
    with db.unit() as repos:
        assert first == second and repos.messages.count("main") == 1
        assert repos.messages.recent("main", 5)[0].content == "b"
    db.close()


def test_config_json_values(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.config.set("cycle/main", {"pause_s": 2.5, "idle": None})
    with db.unit() as repos:
        assert repos.config.get("cycle/main") == {"pause_s": 2.5, "idle": None}
        assert repos.config.get("missing", 7) == 7
    db.close()


def test_v8_database_gets_its_memories_full_text_indexed(tmp_path, caplog):
    from memory.repositories import lexical
    from memory.store import record_turn

    db = Database.open(tmp_path)
    with db.unit() as repos:
        for n in range(5):
            record_turn(repos, ref=str(n), text=f"The heron number {n} fishes at the pier.", author="Ann", episode="e")
        repos.diary.add("Bread rises slowly in a cold kitchen.")
        repos.items.remove("message", "4")
    db.close()
    conn = sqlite3.connect(tmp_path / "anima.sqlite")  # a v8 database: no full-text index yet
    conn.execute("DROP TABLE memory_fts_terms")
    conn.execute("DROP TABLE memory_fts")
    conn.execute("UPDATE schema_version SET version = 8")
    conn.commit()
    conn.close()
    caplog.set_level("INFO", logger=lexical.__name__)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lexical, "BACKFILL_PAGE", 2)  # pages of two: the progress lines show
        db = Database.open(tmp_path)
    assert "full-text index: 6/6 memories" not in caplog.text and "full-text index: 2/5 memories" in caplog.text
    with db.unit() as repos:
        documents = repos.items.lexical.documents(range(1, 10))
        assert len(documents) == 5 and repos.items.lexical.count() == 5  # the deleted turn is not indexed
        kitchen = repos.items.find("diary", repos.diary.list()[0].id)
        assert "kitchen" in documents[kitchen.id][0] and repos.items.lexical.candidates(["kitchen"], 5) == [kitchen.id]
        assert repos.items.lexical.document_frequencies(["heron", "bread"], 100) == {"heron": 4, "bread": 1}
    db.close()


def test_v1_database_is_migrated_to_v2_keeping_its_threads(tmp_path):
    Database.open(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "anima.sqlite")
    for column in ("origin", "owner", "error"):  # make it look like a v1 database
        conn.execute(f"ALTER TABLE threads DROP COLUMN {column}")
    conn.execute("ALTER TABLE llm_memory DROP COLUMN status")
    conn.execute("ALTER TABLE unverified_facts DROP COLUMN resolution")
    conn.execute("DROP TABLE anti_stagnation_metrics")  # v5
    conn.execute("DROP TABLE open_questions")  # v6
    conn.execute("DROP TABLE sessions")
    for column in ("repl_mode", "repl_status", "repl_config", "repl_thread", "repl_error", "archived_at"):
        conn.execute(f"ALTER TABLE tasks DROP COLUMN {column}")
    conn.execute("ALTER TABLE goals DROP COLUMN archived_at")  # v7
    conn.execute("DROP TABLE approvals")
    conn.execute("DROP TABLE audit_log")
    conn.execute(
        "INSERT INTO tasks (title, description, priority, pinned, status, kind, tags, created_at, updated_at) "
        "VALUES ('a v1 task', '', 1, 0, 'open', 'task', '[]', '2026-01-01', '2026-01-01')"
    )
    conn.execute(
        "INSERT INTO llm_memory (title, content, tags, created_at, updated_at) "
        "VALUES ('', 'an idea from v1', '[]', '2026-01-01', '2026-01-01')"
    )
    conn.execute(
        "INSERT INTO threads (id, parent_id, label, playbook, persona, depth, window_ratio, status, tick, "
        "created_at) VALUES ('main', NULL, '', '', '', 0, 1.0, 'running', 3, '2026-01-01'), "
        "('main/x', 'main', 'x', '', '', 1, 0.8, 'completed', 0, '2026-01-01')"
    )
    conn.execute("UPDATE schema_version SET version = 1")
    conn.commit()
    conn.close()
    db = Database.open(tmp_path)
    with db.unit() as repos:
        assert repos.threads.get("main").tick == 3 and repos.threads.get("main").origin == "root"
        assert repos.threads.get("main/x").origin == "playbook" and repos.threads.ratio_product("main/x") == 0.8
        assert [(m.content, m.status) for m in repos.llm_memory.recent()] == [("an idea from v1", "active")]
        assert (
            repos.items.find("llm_memory", repos.llm_memory.recent()[0].id).text == "an idea from v1"
        )  # now searchable
        task = repos.tasks.list()[0]
        assert (task.title, task.repl_mode, task.repl_status, task.archived_at) == ("a v1 task", "none", None, None)
    with db.session() as s:
        assert s.execute(text("SELECT version FROM schema_version")).scalar_one() == SCHEMA_VERSION
        assert {
            "memory_items",
            "memory_journal",
            "diary_entries",
            "goals",
            "entities",
            "anti_stagnation_metrics",
            "open_questions",
            "sessions",
            "approvals",
            "audit_log",
            "mesh_containers",
            "mesh_refusals",
            "sealed_secrets",
        } <= set(inspect(s.bind).get_table_names())
    db.close()
