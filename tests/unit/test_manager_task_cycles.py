"""managers/task_cycles.py: the rules of a task's sub-cycle, over a real database, without running a tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from managers.task_cycles import Over
from memory import Database
from tests.fakes.managers import factory

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _cycle(db: Database, **config: object) -> int:
    with db.unit() as repos:
        main = repos.threads.ensure("main", persona="p", origin="root")
        repos.threads.create_child("main-t1", main, label="task 1", window_ratio=0.5, origin="task", owner="me")
        task = repos.tasks.add("map the tide pools")
        repos.tasks.set_repl(
            task.id,
            repl_mode="read_only",
            repl_status="running",
            repl_thread="main-t1",
            repl_config={"started_at": START.isoformat(), **config},
        )
        return task.id


def test_an_error_is_retried_with_a_growing_delay_then_the_task_is_frozen(tmp_path: Path) -> None:
    db = Database.open(tmp_path)
    try:
        task_id = _cycle(db, retries=2, backoff_s=10, backoff_factor=3)
        managers = factory(db, clock=lambda: START)
        with managers.unit() as house:
            assert house.task_cycles.failed(task_id, "boom") == (START + timedelta(seconds=10), 1)
        with managers.unit() as house:
            assert house.task_cycles.waiting_until(task_id) == (START + timedelta(seconds=10)).isoformat()
            assert house.task_cycles.failed(task_id, "boom again") == (START + timedelta(seconds=30), 2)
        with managers.unit() as house:
            assert house.task_cycles.failed(task_id, "and again") is None  # no retry left
            state = house.task_cycles.state(task_id)
            house.task_cycles.ended(state, "error: and again", status="error", error="and again", chronicle=None)
        with db.reading() as repos:
            task = repos.tasks.get(task_id)
            assert (task.status, task.repl_status, task.repl_error) == ("frozen", "error", "and again")
            told = [n.text for n in repos.notes.list(source="system", limit=10)]
            assert any("sub-cycle error (error: and again)" in t for t in told)
    finally:
        db.close()


def test_a_cycle_ends_on_its_budget_without_restart_and_on_its_deadline_with_one(tmp_path: Path) -> None:
    db = Database.open(tmp_path)
    try:
        task_id = _cycle(db, token_budget=100, tokens_before=100, deadline_s=60)
        with factory(db, clock=lambda: START).reading() as house:
            over = house.task_cycles.over(task_id)
        assert over == Over("its budget of 100 tokens is spent (100)")
        with db.unit() as repos:
            repos.tasks.set_repl(task_id, repl_config={"started_at": START.isoformat(), "deadline_s": 60})
        with factory(db, clock=lambda: START + timedelta(seconds=30)).reading() as house:
            assert house.task_cycles.over(task_id) is None  # within its deadline: it goes on
        with factory(db, clock=lambda: START + timedelta(seconds=61)).unit() as house:
            assert house.task_cycles.over(task_id) == Over("timeout", timeout=True)
            state = house.task_cycles.state(task_id)
            house.task_cycles.restarted(state, "main-t1-r1")
        with db.reading() as repos:
            task = repos.tasks.get(task_id)
            assert task.repl_thread == "main-t1-r1" and task.repl_config["restarts"] == 1
    finally:
        db.close()


def test_a_cycle_left_by_a_dead_process_is_taken_over_and_the_main_loop_told(tmp_path: Path) -> None:
    db = Database.open(tmp_path)
    try:
        task_id = _cycle(db)
        with factory(db, clock=lambda: START).unit() as house:
            told = house.task_cycles.take_over_interrupted("this-process", alive=lambda owner: False)
        assert told == [
            f"task {task_id}'s sub-cycle was interrupted at tick 0 (the process stopped); it resumes "
            "from its last checkpoint"
        ]
        with factory(db).unit() as house:  # taken: not again
            assert house.task_cycles.take_over_interrupted("this-process", alive=lambda owner: False) == []
        with db.reading() as repos:
            assert repos.threads.get("main-t1").owner == "this-process"
    finally:
        db.close()
