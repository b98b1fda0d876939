"""Task sub-cycles in `full` mode (HMP `repl_mode: full`): the cycle acts like the main loop — any command, under
the same consent rules (a privileged one waits for the human) — and stops when its own token budget is spent;
a read-only cycle is still refused what it may not touch."""

from __future__ import annotations

import json

from graph.loop import Stopper, run_loop
from tests.fakes.llm import FakeLLM


def commands(*items) -> str:
    return (
        "# Commands:\n"
        + json.dumps([{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(items)])
        + "\n# End commands"
    )


ACTS = (
    ("diary.add", {"text": "The full cycle keeps a diary too."}),
    ("tasks.update", {"id": 2, "priority": 9}),
    ("identity.update", {"text": "I am a lighthouse keeper."}),
    ("notes.add", {"text": "Found: the beam turns."}),
)


def run(agent_factory, mode: str, budget: int):
    def respond(prompt: str) -> str:
        if "I am a sub-cycle of" in prompt:
            return "Working on it.\n" + commands(*ACTS)
        if "; tick 1;" in prompt:
            return "I will delegate.\n" + commands(("tasks.run", {"id": 1, "mode": mode, "token_budget": budget}))
        return "I wait for my task."

    fake = FakeLLM("fake", responses=respond)
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.tasks.add("Study the lighthouse")
        repos.tasks.add("Someone else's task", priority=1)
    run_loop(agent, ticks=3, stopper=Stopper(), idle_poll_s=0)
    return agent, fake


def test_a_full_cycle_acts_like_the_main_loop_under_the_same_consent_and_its_own_budget(agent_factory):
    agent, fake = run(agent_factory, "full", 1_000)
    sub = [c["prompt"] for c in fake.calls if "I am a sub-cycle of" in c["prompt"]]
    assert len(sub) == 1 and "I may do what Lumen does, with the same commands" in sub[0]
    with agent.services.db.unit() as repos:
        task = repos.tasks.get(1)
        assert (task.repl_mode, task.repl_status) == ("full", "stopped")
        done = {c.type: c.status for c in repos.commands.recent(50, thread_id=task.repl_thread)}
        assert done == {
            "diary.add": "executed",
            "tasks.update": "executed",
            "identity.update": "pending_approval",
            "notes.add": "executed",
        }
        assert [e.text for e in repos.diary.list()] == ["The full cycle keeps a diary too."]
        assert repos.tasks.get(2).priority == 9
        [approval] = repos.approvals.pending()
        assert (approval.type, approval.thread_id) == ("identity.update", task.repl_thread)
        ended = [n.text for n in repos.notes.list(source="system") if "sub-cycle stopped" in n.text]
        assert ended and "its budget of 1,000 tokens is spent" in ended[0]
        assert [n.text for n in repos.notes.list(source="llm:task")] == ["Found: the beam turns."]


def test_a_read_only_cycle_is_refused_what_it_may_not_touch(agent_factory):
    agent, _ = run(agent_factory, "read_only", 1_000)
    with agent.services.db.unit() as repos:
        task = repos.tasks.get(1)
        done = {c.type: c.status for c in repos.commands.recent(50, thread_id=task.repl_thread)}
        assert done == {
            "diary.add": "refused",
            "tasks.update": "refused",
            "identity.update": "refused",
            "notes.add": "executed",
        }
        assert repos.diary.list() == [] and repos.tasks.get(2).priority == 1 and repos.approvals.pending() == []
