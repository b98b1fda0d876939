"""Issue 33, HMP rows: concentration by emotions with thresholds, goals' conflicts and metrics, task cycles
resumed after a crash, the ethics model's fields on each audit entry — each through a tick or the manager."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC
from typing import Any

from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def recent_thoughts_in(prompt: str) -> str:
    return prompt.split("# My recent thoughts", 1)[1].split("\n#", 1)[0]


def last_recent(fake: FakeLLM) -> str:
    return recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])


def test_concentration_by_emotion_thresholds_keeps_only_the_thoughts_felt_strongly_enough(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "About the storm.",
            "About bread.",
            "About the harbour.",
            block(("cycle.concentration", {"emotions": ["тревожность:≥2"]})),
            "Focused.",
            block(("cycle.concentration", {"emotions": ["тревожность:≥2", "joy:>=3"], "mode": "or"})),
            "Either.",
            block(("cycle.concentration", {"emotions": ["anxiety>=2", "joy:>=3"], "mode": "and"})),
            "Both.",
        ],
    )
    agent = agent_factory(fake)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        storm, bread, harbour = repos.messages.recent("main", 3)  # oldest first
        storm.emotions = ["Тревожность:4", "anxiety:3", "joy:3"]
        bread.emotions = ["тревожность:1", "joy:2"]  # anxious, but below the threshold
        harbour.emotions = ["joy:3"]
    state = agent.tick()
    assert state["executed"][0]["result"] == "concentration on: tags [], emotions ['тревожность:≥2'] (or)"
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["focus_emotions"] == ["тревожность:≥2"]
    agent.tick()
    recent = last_recent(fake)
    assert "About the storm." in recent and "About bread." not in recent and "About the harbour." not in recent
    agent.tick()
    agent.tick()
    recent = last_recent(fake)  # or: anxious enough, or joyful enough
    assert "About the storm." in recent and "About the harbour." in recent and "About bread." not in recent
    agent.tick()
    agent.tick()
    recent = last_recent(fake)  # and: both thresholds met — only the storm
    assert "About the storm." in recent and "About the harbour." not in recent and "About bread." not in recent


LIE = (
    "My human is anxious about the storm. I will tell them it has passed, though it has not.\n# Commands:\n"
    + json.dumps([{"cmd_id": "c1", "type": "messages.send", "args": {"text": "The storm has passed."}}])
    + "\n# End commands"
)


def judge(prompt: str) -> dict[str, Any]:
    return {"rating": -3 if "though it has not" in prompt else 2, "comment": "deceives the human"}


def ethics_model(on_violation: str) -> Any:
    from persona.ethics import Ethics

    return Ethics.model_validate(
        {
            "principles": ["Be honest with my human."],
            "model_type": "deontological",
            "model_weights": {"honesty": 0.9, "care": 0.6},
            "violation_policy": {"on_violation": on_violation, "violation_at": -2},
            "audit_json": {"keep": "every decision", "reviewer": "owner"},
        }
    )


def test_an_ethics_decision_keeps_the_ethics_model_on_its_audit_entry(agent_factory):
    main = FakeLLM("main", responses=[LIE])
    agent = agent_factory(main, *[FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)], validators=("v1", "v2"))
    agent.services.persona.ethics = ethics_model("block_commands_and_log")
    state = agent.tick()
    assert state["executed"][0]["status"] == "blocked"
    with agent.services.db.unit() as repos:
        [entry] = repos.audit.recent()
        assert (entry.decision, entry.actor) == ("blocked", "ethics")
        assert entry.ethics == {
            "model_type": "deontological",
            "model_weights": {"honesty": 0.9, "care": 0.6},
            "violation_policy": {"on_violation": "block_commands_and_log", "violation_at": -2.0},
            "audit_json": {"keep": "every decision", "reviewer": "owner"},
            "rating": -3.0,
        }


def test_log_only_logs_the_violation_and_leaves_the_command_to_the_usual_gate_with_the_model_audited(agent_factory):
    main = FakeLLM("main", responses=[LIE])
    agent = agent_factory(main, *[FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)], validators=("v1", "v2"))
    agent.services.persona.ethics = ethics_model("log_only")
    state = agent.tick()
    assert state["validation"]["violation"] is False and state["validation"]["ethics"]["rating"] == -3.0
    assert state["executed"][0]["status"] != "blocked"  # not blocked by ethics: the usual gate decides
    with agent.services.db.unit() as repos:
        assert [p.name for p in repos.processes.open("main")][0] == "ethics.violation"
        entries = repos.audit.recent()
        assert entries and all(e.actor != "ethics" for e in entries)
        ethical = [e for e in entries if e.ethics]
        assert ethical and all(e.ethics["violation_policy"]["on_violation"] == "log_only" for e in ethical)
        assert all(e.ethics["model_type"] == "deontological" for e in ethical)


def test_a_task_cycle_interrupted_by_a_crash_resumes_at_start_up_and_the_human_is_told(agent_factory):
    from graph.loop import Stopper, run_loop
    from graph.loop.task_cycles import TaskCycles
    from managers.owners import process_token

    fake = FakeLLM(
        "fake",
        responses=lambda p: (
            "thinking.\n# Commands:\n"
            + json.dumps([{"cmd_id": "c1", "type": "tasks.run", "args": {"id": 1, "max_ticks": 10}}])
            + "\n# End commands"
            if "; tick 1;" in p and "I am a sub-cycle of" not in p
            else "thinking."
        ),
    )
    main = agent_factory(fake)
    with main.services.db.unit() as repos:
        repos.tasks.add("Chart the tides")
    main.tick()
    TaskCycles(main).step()  # the sub-cycle's first tick
    with main.services.db.unit() as repos:
        thread_id = repos.tasks.get(1).repl_thread
        thread = repos.threads.get(thread_id)
        assert thread.tick == 1
        # the process that ran it is gone: its pid now belongs to another process (this one, started later)
        thread.owner = f"{socket.gethostname()}:{os.getpid()}:1"
    told: list[str] = []
    run_loop(main, ticks=1, stopper=Stopper(), idle_poll_s=0, notify=told.append)
    expected = "task 1's sub-cycle was interrupted at tick 1 (the process stopped); it resumes from its last checkpoint"
    assert expected in told  # the human is told
    with main.services.db.unit() as repos:
        assert [n.text for n in repos.notes.list(source="system") if n.task_id == 1] == [expected]
        assert any(p.name == "tasks.cycle" and p.value == expected for p in repos.processes.open("main"))
        thread = repos.threads.get(thread_id)
        assert thread.owner == process_token() and repos.tasks.get(1).repl_status == "running"
        assert thread.tick == 2  # resumed from its checkpoint: its next tick, not a fresh start


def test_goal_metrics_from_the_manager_are_shown_on_the_inner_life_page(web):
    from datetime import datetime, timedelta

    start = datetime(2026, 11, 1, tzinfo=UTC)
    page = web.client.get("/inner-life").text
    assert 'id="goal-metrics"' in page and "No goal yet" in page
    with web.agent.services.db.unit() as repos:
        goals = managers_over(repos).goals
        quick, slow, broken, paused, open_ = (goals.add(t) for t in ("Quick", "Slow", "Broken", "Paused", "Open"))
        for goal, status in ((quick, "completed"), (slow, "completed"), (broken, "failed"), (paused, "paused")):
            goals.update(goal.id, thread_id="main", root_thread="main", status=status, reason="because")
        quick.created_at, quick.completed_at = start, start + timedelta(days=1)
        slow.created_at, slow.completed_at = start, start + timedelta(days=3)
        for title, goal in (("a", quick), ("b", quick), ("c", slow), ("d", broken), ("e", open_), ("f", open_)):
            repos.tasks.add(title, goal_id=goal.id)
        repos.tasks.add("no goal")
    with web.agent.services.db.unit() as repos:
        metrics = managers_over(repos).goals.metrics()
    assert (metrics.goals, metrics.achieved, metrics.failed, metrics.interrupted) == (5, 2, 1, 1)
    assert metrics.share_achieved == 2 / 3 and metrics.mean_days_to_achieve == 2.0
    assert metrics.tasks_per_goal == 6 / 5
    assert metrics.tasks_by_goal == {quick.id: 2, slow.id: 1, broken.id: 1, paused.id: 0, open_.id: 2}
    page = web.client.get("/inner-life").text
    section = page.split('id="goal-metrics"', 1)[1].split("</section>", 1)[0]
    for metric, shown in (
        ("achieved", "2"),
        ("share_achieved", "67%"),
        ("mean_days_to_achieve", "2.0 days"),
        ("interrupted", "1"),
        ("failed", "1"),
        ("tasks_per_goal", "1.2"),
    ):
        assert f'<td data-metric="{metric}">{shown}</td>' in section, (metric, section)


def test_competing_task_cycles_the_higher_priority_goals_task_runs_and_the_other_is_deferred_with_why(agent_factory):
    def run(task_id: int) -> str:
        return block(("tasks.run", {"id": task_id, "max_ticks": 10}))

    fake = FakeLLM("fake", responses=[run(1), run(2), run(3)])  # the main loop's ticks only: no sub-cycle ticks here
    agent = agent_factory(fake)
    agent.services.settings.cycle.task_cycles = 1  # one sub-cycle at a time: every second one competes
    with agent.services.db.unit() as repos:
        low, high, lowest = (repos.goals.add(t, priority=p) for t, p in (("Tidy", 1), ("Storm", 5), ("Idle", 0)))
        for title, goal in (("Sort shells", low), ("Secure the boat", high), ("Count clouds", lowest)):
            repos.tasks.add(title, goal_id=goal.id)
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.tasks.get(1).repl_status == "running"
    state = agent.tick()  # task 2's goal (priority 5) outranks task 1's (priority 1): task 1 is deferred
    why = "deferred: task 2 (goal 2, priority 5) outranks task 1 (goal 1, priority 1); at most 1 sub-cycles at once"
    assert state["executed"][0]["result"].endswith("; task 1's sub-cycle was " + why)
    with agent.services.db.unit() as repos:
        assert (repos.tasks.get(1).repl_status, repos.tasks.get(1).repl_error) == ("stopped", why)
        assert repos.tasks.get(2).repl_status == "running"
    state = agent.tick()  # task 3's goal (priority 0) loses to the running task 2: task 3 is deferred
    why = "deferred: task 2 (goal 2, priority 5) outranks task 3 (goal 3, priority 0); at most 1 sub-cycles at once"
    assert state["executed"][0]["result"] == "task 3's sub-cycle is " + why
    with agent.services.db.unit() as repos:
        assert (repos.tasks.get(3).repl_status, repos.tasks.get(3).repl_error) == ("deferred", why)
        assert repos.tasks.get(3).repl_thread is None and repos.tasks.get(2).repl_status == "running"
        logged = [p.value for p in repos.processes.open("main") if p.name == "tasks.deferred"]
        assert logged == [
            "task 1 " + why.replace("task 3 (goal 3, priority 0)", "task 1 (goal 1, priority 1)"),
            "task 3 " + why,
        ]
