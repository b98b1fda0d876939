"""The tick's SQL: its config keys read once per tick (the run's snapshot), the tick row written in Core, and how
many statements a warm tick sends — on SQLite and (marked `integration`, a throwaway cluster) PostgreSQL. Counts of
statements, never times (bench/tick.py measures those)."""

from __future__ import annotations

import contextvars
import statistics
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event

from memory import Database
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.unit.test_repositories_consent import db, db_url  # noqa: F401 (fixtures: both dialects)
from tests.unit.test_tick_cost import statements


def outside_the_run(db: Database, write) -> None:
    """`write(repos)` in a unit of its own, as the web or another process would: outside the tick's run."""

    def unit() -> None:
        with db.unit() as repos:
            write(repos)

    contextvars.Context().run(unit)


def test_a_tick_reads_its_config_keys_once_and_sees_what_was_set_before_it(db):
    with db.unit() as repos:
        repos.config.set_cycle("main", {"pause_s": 1})
        repos.config.emotion_vocabulary = ["joy"]
        repos.config.set_self_change("cycle.pause_s", 2)
    with db.shared_session():
        with db.unit() as repos, statements(db) as sent:
            repos.config.preload_tick("main")  # the tick's first step
            assert len(sent) == 1
        with db.unit() as repos, statements(db) as sent:  # a later step's unit reads nothing again
            repos.config.preload_drives()
            repos.config.preload_memory_upkeep("main")
            assert repos.config.cycle("main") == {"pause_s": 1} and repos.config.emotion_vocabulary == ["joy"]
            assert repos.config.self_changes() == {"cycle.pause_s": 2} and repos.config.emotion_note_pointer == 0
            assert repos.config.abstract_request("main") is None
            repos.config.cycle("main")["pause_s"] = 9  # what a unit was given is its own copy
            assert sent == []
        with db.reading() as repos:
            assert repos.config.cycle("main") == {"pause_s": 1}
        outside_the_run(db, lambda repos: repos.config.set_cycle("main", {"pause_s": 5}))
        outside_the_run(db, lambda repos: setattr(repos.config, "loop_control", {"want": "paused"}))
        with db.unit() as repos, statements(db) as sent:
            assert repos.config.cycle("main") == {"pause_s": 1}  # the tick keeps what it started with
            assert repos.config.loop_control == {"want": "paused"} and len(sent) == 1  # never from the snapshot
    with db.unit() as repos:  # the next tick: the change made meanwhile
        assert repos.config.cycle("main") == {"pause_s": 5}


def test_the_ticks_own_writes_are_seen_by_its_later_units_and_a_rolled_back_one_is_not(db):
    with db.unit() as repos:
        repos.config.set_cycle("main", {"pause_s": 1})
        repos.config.emotion_vocabulary = ["joy"]
    with db.shared_session():
        with db.unit() as repos:
            repos.config.preload_tick("main")
        with db.unit() as repos:
            repos.config.set_cycle("main", {"pause_s": 2})
            repos.config.set_self_change("cycle.pause_s", 3)
        with db.unit() as repos:
            assert repos.config.cycle("main") == {"pause_s": 2}
            assert repos.config.self_changes() == {"cycle.pause_s": 3}
        with pytest.raises(RuntimeError), db.unit() as repos:
            repos.config.emotion_vocabulary = ["dread"]
            raise RuntimeError("the step failed")
        with db.unit() as repos:
            assert repos.config.emotion_vocabulary == ["joy"]


def test_a_key_written_elsewhere_during_the_tick_is_updated_not_inserted_again(db):
    with db.shared_session():
        with db.unit() as repos:
            repos.config.preload_tick("main")  # no abstract request yet
        outside_the_run(db, lambda repos: repos.config.set_abstract_request("main", {"trigger": "human"}))
        with db.unit() as repos:  # the snapshot said absent: the write looks again (an INSERT would collide)
            repos.config.set_abstract_request("main", {"trigger": "every_n"})
        with db.unit() as repos:
            assert repos.config.abstract_request("main") == {"trigger": "every_n"}


def test_the_tick_row_is_started_counted_finished_and_failed(db):
    at = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    with db.unit() as repos:
        repos.threads.ensure("main")
    with db.unit() as repos:
        assert repos.ticks.next_unfinished("main", 1) == 1
        row = repos.ticks.start("main", 1, "chat")
        assert row.summary == {"attempts": 1} and row.status == "running" and row.id
        row.started_at = at  # the row is the session's: a change to it is written
        repos.ticks.finish(
            "main",
            1,
            status="ok",
            summary={"attempts": 1},
            llm_calls=1,
            prompt_tokens=5,
            completion_tokens=2,
            llm_ms=1.0,
        )
        assert row.status == "ok" and row.finished_at is not None
    with db.unit() as repos:
        assert repos.ticks.next_unfinished("main", 1) == 2  # tick 1 finished
        repos.ticks.start("main", 2, "chat")
    with db.unit() as repos:  # tick 2 started again: the run before was cut short
        assert repos.ticks.next_unfinished("main", 2) == 2
        assert repos.ticks.start("main", 2, "chat").summary == {"attempts": 2}
        repos.ticks.keep_answer("main", 2, {"response": "kept"})
        assert repos.ticks.kept_answer("main", 2) == {"response": "kept"}
        repos.ticks.fail("main", 3, step="s05", error="boom")
    with db.unit() as repos:
        rows = {t.tick: t for t in repos.ticks.recent(10, "main")}
        assert rows[1].started_at.replace(tzinfo=UTC) == at and rows[1].prompt_tokens == 5
        assert rows[2].summary == {"attempts": 2, "answer": {"response": "kept"}} and rows[2].status == "running"
        assert rows[3].status == "failed" and rows[3].summary["error"] == "boom"


def test_the_prompts_abstracts_are_the_newest_as_plain_rows(db):
    now = datetime.now(UTC)
    with db.unit() as repos:
        for n, tags in enumerate((["sea"], ["land"], ["Sea", "sky"])):
            repos.abstracts.add(f"title {n}", f"summary {n}", tags=tags)
    with db.unit() as repos:
        assert [(r.id, r.title, r.summary, r.tags) for r in repos.abstracts.newest_lines(tags=["sea"], limit=2)] == [
            (a.id, a.title, a.summary, a.tags) for a in repos.abstracts.list(tags=["sea"], limit=2)
        ]
        assert [r.title for r in repos.abstracts.newest_lines(since=now - timedelta(days=1), limit=2)] == [
            "title 2",
            "title 1",
        ]


def test_a_warm_repeating_tick_sends_at_most_74_statements(tmp_path):
    """A pin from above (main sent 74 per tick before the config snapshot and the Core tick row, 85 on its busiest
    tick of eight; 71 after them; then +1 for whether a human waits before a side call — nodes/attention.py — and +1
    for whether any row is tainted — nodes/steps/s04_prepare_context/untrusted.py — and +1 for the peers the persona
    knows, its prompt's peers block): a change that adds statements to every tick fails here."""
    fake = FakeLLM("fake", responses=lambda prompt: f"thought number {len(prompt)} about something new")
    agent = make_agent(tmp_path, fake, checkpointer="sqlite")
    try:
        for _ in range(3):  # warm: the model's registry, the memory index, the first episode are behind it
            agent.tick()
        engine = agent.services.db.engine
        counts, commits = [], []
        for _ in range(8):
            committed = []
            record = lambda conn: committed.append(1)  # noqa: B023, E731
            event.listen(engine, "commit", record)
            with statements(agent.services.db) as sent:
                agent.tick()
            event.remove(engine, "commit", record)
            counts.append(len(sent))
            commits.append(len(committed))
        assert statistics.median(counts) <= 74 and max(counts) <= 85, counts
        assert max(commits) <= 9, commits
    finally:
        agent.close()
