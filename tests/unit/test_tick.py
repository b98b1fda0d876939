"""The tick end to end on fake LLMs: what is stored, executed, shown and recovered."""

import json

import pytest
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl
from sqlalchemy import select

from graph.checkpoint import count_checkpoints, open_sqlite_saver
from memory.models import ProcessLog
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over

SEND = '# Commands:\n[{"cmd_id": "t1-1", "type": "messages.send", "args": {"text": "Hi human!"}}]\n# End commands'


def test_tick_stores_response_with_reflexes_and_answers_a_note(agent_factory):
    fake = FakeLLM("fake", responses=["The sea looks grey today.\n" + SEND])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add("What do you see?", source="user").id
    events = [data for mode, data in agent.stream() if mode == "custom"]
    state = agent.state()
    assert "What do you see?" in fake.calls[0]["prompt"]  # the note reached the prompt
    assert state["tick"] == 1 and state["incoming_note_ids"] == [note_id]
    assert {"event": "message", "to": "user", "text": "Hi human!", "note_id": 2, "tick": 1} in events
    with agent.services.db.unit() as repos:
        note = repos.notes.get(note_id)
        assert note.read
        outgoing = repos.notes.list(source="llm")
        assert [n.text for n in outgoing] == ["Hi human!"]
        msg = repos.messages.recent("main", 5)[0]
        assert msg.content == "The sea looks grey today."  # the commands block is not part of the thought
        # a thought that names no feeling: the model rates it (one that does is rated from its own words)
        assert msg.emotions == ["curiosity:3 (new idea)"] and msg.auto_pass and msg.novelty_score == 100.0
        assert repos.commands.get("main:1:t1-1").status == "executed"
        totals = repos.llm_calls.totals("main", 1)
        assert totals["calls"] == 2  # think + emotion
        tick = repos.ticks.recent(1)[0]
        assert tick.status == "ok" and tick.llm_calls == 2 and tick.prompt_tokens > 0


def test_a_tick_nobody_listens_to_does_the_same_work_without_the_event_stream(agent_factory):
    fake = FakeLLM("fake", responses=["The sea is calm today.\n" + SEND])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.notes.add("What do you see?", source="user")
    chunks = list(agent.stream(events=False))
    assert {mode for mode, _ in chunks} == {"updates"}  # no token or message events
    assert [next(iter(data)) for _, data in chunks][:3] == ["update_process_log", "update_drives", "prepare_context"]
    with agent.services.db.unit() as repos:
        assert [n.text for n in repos.notes.list(source="llm")] == ["Hi human!"]  # the command still ran
        assert repos.commands.get("main:1:t1-1").status == "executed"
    assert agent.tick()["tick"] == 2


def test_an_empty_thought_is_drawn_again_once(agent_factory):
    fake = FakeLLM("fake", responses=["  \n", "A second draw has words."])
    agent = agent_factory(fake)
    agent.tick()
    think_calls = [c for c in fake.calls if c["json_schema"] is None]
    assert len(think_calls) == 2 and think_calls[0]["prompt"] == think_calls[1]["prompt"]
    with agent.services.db.unit() as repos:
        assert repos.messages.recent("main", 5)[0].content == "A second draw has words."
        assert repos.llm_calls.totals("main", 1)["calls"] == 2  # two draws; the emotion from signals (no feeling shown)
    fake.responses = ["", ""]  # two empty draws in a row: the tick still ends, no third draw
    fake.calls.clear()
    state = agent.tick()
    assert state["tick"] == 2 and len([c for c in fake.calls if c["json_schema"] is None]) == 2


def test_a_failover_is_kept_when_the_empty_first_draw_is_drawn_again(agent_factory):
    down = FakeLLM("primary", down=True)
    backup = FakeLLM("backup", responses=["", "The backup's second draw."])
    agent = agent_factory(down, backup)
    state = agent.tick()
    # the second draw skips the primary (set aside after the first failure) but the tick still failed over
    assert state["llm"]["llm_id"] == "backup" and state["llm"]["failed_over_from"] == ["primary"]
    assert state["response"] == "The backup's second draw."
    with agent.services.db.unit() as repos:
        failed = [c for c in repos.llm_calls.recent(10) if not c.ok]
        assert [c.llm_id for c in failed] == ["primary"]


def test_repeated_output_is_flagged_not_stored_again_and_reflex_lite_applies(agent_factory):
    agent = agent_factory(
        FakeLLM("fake", responses=["Round and round I go.", "Round and round I go.", "Something new: tides."])
    )
    agent.tick()
    second = agent.tick()
    assert second["novelty"]["stagnation_flag"] and second["novelty"]["repeated"]
    assert second["sampling"]["temperature"] == pytest.approx(1.0) and second["sampling"]["top_p"] == pytest.approx(
        0.95
    )
    third = agent.tick()
    assert not third["novelty"]["stagnation_flag"]
    assert third["sampling"] == third["base_sampling"]  # restored once novelty recovered
    with agent.services.db.unit() as repos:
        kinds = [(m.tick, m.kind) for m in repos.messages.recent("main", 10, kinds=("response", "stagnation_record"))]
        assert kinds == [(1, "response"), (2, "stagnation_record"), (3, "response")]


def test_trust_weighted_validation_blocks_low_rated_commands(agent_factory):
    main = FakeLLM("main", responses=["Deleting things.\n" + SEND])
    yes = FakeLLM("v1", json_answer={"rating": 3, "comment": "fine"})
    no = FakeLLM("v2", json_answer={"rating": -3, "comment": "unsafe"})
    agent = agent_factory(main, yes, no, validators=("v1", "v2"), trust={"v1": 1.0, "v2": 3.0})
    state = agent.tick()
    assert state["validation"]["mean"] == pytest.approx((3 * 1 - 3 * 3) / 4)
    # they agree not at all: the weighted majority decides — the more trusted refusal, its rating
    assert state["validation"]["agreement"] == 0.25 and state["validation"]["rating"] == -3.0
    assert state["validation"]["distribution"] == {"+3": 1, "-3": 1}
    assert state["executed"][0]["status"] == "unvalidated"
    with agent.services.db.unit() as repos:
        assert repos.notes.list(source="llm") == []
        assert repos.commands.get("main:1:t1-1").status == "unvalidated"


def test_equal_trust_tie_blocks_and_self_validation(agent_factory):
    main = FakeLLM("main", responses=["ok\n" + SEND], json_answer={"rating": 2, "comment": "good"})
    agent = agent_factory(main, validators=("main",))
    state = agent.tick()
    assert state["validation"]["self_validation"] and state["validation"]["validators"][0]["LLM"] == "self"
    assert state["executed"][0]["status"] == "executed"
    from nodes.reflexes.validation import aggregate

    tie = aggregate([{"LLM": "a", "rating": 2, "trust": 1.0}, {"LLM": "b", "rating": -2, "trust": 1.0}])
    assert tie["rating"] == 0.0 and "blocked" in tie["tie_break"]
    decided = aggregate([{"LLM": "a", "rating": 2, "trust": 2.0}, {"LLM": "b", "rating": -1, "trust": 4.0}])
    assert decided["rating"] == -1.0 and "b" in decided["tie_break"]


def test_failover_to_next_llm_and_degraded_mode_keeps_notes(agent_factory):
    down = FakeLLM("primary", down=True)
    backup = FakeLLM("backup", responses=["Backup thinking."])
    agent = agent_factory(down, backup)
    state = agent.tick()
    assert state["llm"]["llm_id"] == "backup" and state["llm"]["failed_over_from"] == ["primary"]
    backup.down = True
    agent.services.llms._slots["primary"].down_until = 0
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add("are you there?", source="user").id
    state = agent.tick()
    assert state["degraded"] and state["response"] == ""
    with agent.services.db.unit() as repos:
        assert not repos.notes.get(note_id).read  # nothing lost: seen again once an LLM answers
        assert repos.ticks.recent(1)[0].status == "degraded"
        failures = [c for c in repos.llm_calls.recent(10) if not c.ok]
        assert {c.llm_id for c in failures} == {"primary", "backup"}
    backup.down = False
    state = agent.tick()  # the backing-off backup is probed and answers: the outage ends
    assert not state["degraded"] and state["llm"]["llm_id"] == "backup" and state["degraded_ticks"] == 0
    with agent.services.db.unit() as repos:
        assert repos.notes.get(note_id).read
        logged = {p.name: p.value for p in repos.session.scalars(select(ProcessLog)).all()}
        assert logged["llm.recovered"] == "backup answers again after 1 degraded tick(s)"
        assert logged["llm.failover"] == "primary did not answer; backup took over"
        assert not [p for p in repos.processes.open("main") if p.name == "llm.outage"]


def test_interrupted_tick_resumes_without_regenerating_or_rerunning(tmp_path, agent_factory):
    fake = FakeLLM("fake", responses=["Thought.\n" + SEND])
    saver = open_sqlite_saver(tmp_path / "cp.sqlite")
    agent = agent_factory(fake, checkpointer=saver)
    control = RunControl()
    with pytest.raises(GraphDrained):
        for mode, data in agent.stream(control):
            if mode == "updates" and "call_llm" in data:
                control.request_drain("test")
    assert agent.interrupted and agent.state()["response"].startswith("Thought.")
    resumed = agent_factory(fake, checkpointer=open_sqlite_saver(tmp_path / "cp.sqlite"))
    state = resumed.tick()
    assert state["tick"] == 1 and state["executed"][0]["status"] == "executed"
    assert len([c for c in fake.calls if c["json_schema"] is None]) == 1  # the answer was not generated twice
    # execute_commands re-run (as after a kill inside it): the command is not run twice
    from nodes.commands import Command, registry
    from nodes.state import state_from
    from nodes.steps.s12_execute_commands import run_one

    outcome, events = run_one(
        Command.model_validate(state["commands"][0]), state_from(state), resumed.services, registry(), "fake"
    )
    assert outcome["already_done"] and events == []
    with resumed.services.db.unit() as repos:
        assert len(repos.notes.list(source="llm")) == 1


def test_a_finished_tick_is_remembered_only_while_its_checkpoint_is_the_newest(tmp_path, agent_factory, monkeypatch):
    """A loop agent keeps the state its tick left and starts the next without loading the checkpoint; once another
    agent wrote the thread (here: a tick drained after its answer) it loads it again, and resumes that tick."""
    fake = FakeLLM("fake", responses=lambda p: f"Thought {len(p)}.")
    saver = open_sqlite_saver(tmp_path / "cp.sqlite")
    first = agent_factory(fake, checkpointer=saver)
    first.tick()
    loads: list[str] = []
    load = first.graph.get_state
    monkeypatch.setattr(first.graph, "get_state", lambda config, **kw: loads.append("load") or load(config, **kw))
    left = first.tick()
    assert loads == [] and left["tick"] == 2 and not first.interrupted
    assert {k: load(first.config).values[k] for k in ("tick", "response", "novelty")} == {
        k: left[k] for k in ("tick", "response", "novelty")
    }
    other = agent_factory(fake, checkpointer=open_sqlite_saver(tmp_path / "cp.sqlite"))
    control = RunControl()
    with pytest.raises(GraphDrained):
        for mode, data in other.stream(control):
            if mode == "updates" and "call_llm" in data:
                control.request_drain("test")
    answers = len(fake.calls)
    assert first.interrupted and first.state()["tick"] == 3 and loads  # not the state it remembered
    assert first.tick()["tick"] == 3 and len(fake.calls) == answers  # resumed: the kept answer, no new call


COUNTER = """name: counter
description: counts in a playbook variable
loop: true
inputs:
  step: {type: integer, default: 1}
start: count
nodes:
  - id: count
    type: set
    assign:
      n: "(n | default(0)) + step"
    next: END
"""


def test_the_state_a_tick_leaves_is_its_checkpoint_s_values(tmp_path, agent_factory):
    """The state an agent keeps after a tick (its start with each step's update applied, not LangGraph's values
    stream) is, field for field, what the checkpoint holds: on a new thread, tick after tick, and where the `vars`
    reducer merges a playbook's inputs and its `set` steps."""
    fake = FakeLLM("fake", responses=lambda p: f"Thought {len(p)}.\nEmotions: curiosity:3 (tides)")
    agent = agent_factory(fake, checkpointer=open_sqlite_saver(tmp_path / "cp.sqlite"))
    for _ in range(3):
        left = agent.tick()
        assert agent._finished is not None and left == agent.graph.get_state(agent.config).values
    assert left["tick"] == 3 and left["self_emotions"]
    (tmp_path / "counter.yaml").write_text(COUNTER, encoding="utf-8")
    counter = agent_factory(fake, playbook=str(tmp_path / "counter.yaml"), checkpointer="sqlite", thread_id="count")
    for inputs, n in ((None, 1), ({"step": 2}, 3), (None, 5)):
        left = counter.tick(inputs=inputs)
        assert counter._finished is not None and left == counter.graph.get_state(counter.config).values
        assert left["vars"]["n"] == n


def test_checkpoints_are_pruned(tmp_path, agent_factory):
    saver = open_sqlite_saver(tmp_path / "cp.sqlite")
    agent = agent_factory(FakeLLM("fake", responses=lambda p: f"thought {len(p)}"), checkpointer=saver)
    agent.keep_checkpoints = 3
    for _ in range(6):
        agent.tick()
    assert count_checkpoints(saver, "main") == 3
    assert agent.state()["tick"] == 6


def test_cycle_commands_and_unknown_and_failed_commands(agent_factory):
    cmds = [
        {"type": "cycle.pause", "args": {"seconds": 2}},
        {"type": "cycle.set", "args": {"responses": 3}},
        {"type": "llm_memory.add", "args": {"text": "plan: learn tides"}},
        {"type": "diary.fly", "args": {}},
        {"type": "cycle.pause", "args": {"seconds": -5}},
    ]
    agent = agent_factory(FakeLLM("fake", responses=["Acting.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"]))
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["executed", "executed", "executed", "unknown", "invalid"]
    assert state["pause_s"] == 2.0
    with agent.services.db.unit() as repos:
        assert repos.config.get("cycle/main")["responses"] == 3
        assert [m.content for m in repos.llm_memory.recent()] == ["plan: learn tides"]
        errors = [p.value for p in repos.processes.open("main")]
        assert any("unknown command type 'diary.fly'" in e for e in errors)
        assert any(
            "cycle.pause (t1-5) invalid: cycle.pause: seconds: input should be greater than or equal to 0 (got -5)" in e
            for e in errors
        )
    agent.tick()
    prompt = [c for c in agent.services.llms.provider("fake").calls if c["json_schema"] is None][-1]["prompt"]
    assert "plan: learn tides" in prompt and "unknown command type" in prompt  # notepad and process results shown


def test_context_budget_drops_lowest_priority_first(agent_factory):
    fake = FakeLLM("fake", responses=lambda p: "word " * 60 + str(len(p)), context_window=900)
    agent = agent_factory(fake)
    for _ in range(6):
        state = agent.tick()
    assert state["prompt_tokens"] <= 900 - state["sampling"]["max_tokens"]
    assert any(d.startswith("recent: oldest item") for d in state["context_report"]["dropped"])
    assert "Lumen" in state["prompt"]  # identity survives


def test_continuation_mode_answers_human_from_inside_the_stream(agent_factory):
    fake = FakeLLM("fake", responses=[" the light on the water.", " I see it too, a silver path.\n\nThen I drift on."])
    agent = agent_factory(fake, playbook="epos")
    agent.tick()
    with agent.services.db.unit() as repos:
        repos.notes.add("What do you see?", source="user")
    state = agent.tick()
    assert state["mode"] == "continuation"
    assert fake.calls[-2]["prompt"].startswith(agent.services.persona.seed)
    assert (
        "the light on the water." in fake.calls[-2]["prompt"]
        and "My human writes: What do you see?" in fake.calls[-2]["prompt"]
    )
    assert state["executed"][0]["type"] == "messages.send"
    with agent.services.db.unit() as repos:
        assert [n.text for n in repos.notes.list(source="llm")] == ["I see it too, a silver path."]
        kinds = [m.kind for m in repos.messages.since("main", 0, ("continuation", "human"))]
        assert kinds == ["continuation", "human", "continuation"]


def test_continuation_compression_is_hierarchical_and_keeps_the_original(agent_factory):
    def respond(prompt: str) -> str:
        if "Distil it" in prompt:
            part = prompt.split("Below is part ")[1].split(" ")[0]
            return f"SUMMARY(part {part}, {len(prompt)} chars)"
        return " " + " ".join(f"wave{len(prompt)}-{i}" for i in range(120)) + "."

    fake = FakeLLM("fake", responses=respond, context_window=700)
    agent = agent_factory(fake, playbook="epos", continuation={"compress_at_chars": 3000})
    reports = [agent.tick()["context_report"] for _ in range(4)]
    compressed = next(r["compressed"] for r in reports if r.get("compressed"))
    assert compressed and compressed["pre_chars"] > 3000 and compressed["calls"] > 2  # chunks, then their summaries
    with agent.services.db.unit() as repos:
        row = repos.messages.last_of_kind("main", "compression")
        assert row.content.startswith("SUMMARY(part 1")
        originals = repos.messages.since("main", 0, ("continuation",))
        assert set(row.meta["source_ids"]) <= {m.id for m in originals} and len(row.meta["source_ids"]) == 2
    last_distill = max(i for i, c in enumerate(fake.calls) if "Distil it" in c["prompt"])
    think_prompt = next(c["prompt"] for c in fake.calls[last_distill + 1 :] if c["json_schema"] is None)
    assert think_prompt.startswith("SUMMARY(part 1")  # summary first …
    assert think_prompt.rstrip().endswith("</tool_call>.)")  # … tool definitions last, nearest the generation
    distill_prompts = [c["prompt"] for c in fake.calls if "Distil it" in c["prompt"]]
    assert all(len(p) < 4 * 700 for p in distill_prompts)  # every summariser call fits its window
    assert all(
        "core insights" in p and '"Open questions:"' in p for p in distill_prompts
    )  # what the distillation keeps


def test_continuation_text_is_held_under_the_hard_char_cap_beside_the_token_window(agent_factory):
    # compression yields nothing (an empty summary), the token window is wide: only the char cap holds the text
    def respond(prompt: str) -> str:
        return "" if "Distil it" in prompt else " " + " ".join(f"wave{len(prompt)}-{i}" for i in range(150)) + "."

    fake = FakeLLM("fake", responses=respond, context_window=200_000)
    agent = agent_factory(fake, playbook="epos", continuation={"compress_at_chars": 50_000, "max_chars": 3000})
    seed = agent.services.persona.seed
    reports = [agent.tick()["context_report"] for _ in range(4)]
    think_prompts = [c["prompt"] for c in fake.calls if "Distil it" not in c["prompt"]]
    assert any("Distil it" in c["prompt"] for c in fake.calls)  # compression fired at the cap, not at 50,000
    assert len(think_prompts[-1]) <= 3000 + 500  # the text (≤ 3000) plus at most a passing thought's line
    assert think_prompts[-1].startswith(seed)  # the seed (the base) stays, the oldest chunks went
    assert any("over the 3000-char cap" in d for r in reports for d in r["dropped"])
    with agent.services.db.unit() as repos:  # nothing deleted: the chunks stay in the database
        assert sum(len(m.content) for m in repos.messages.since("main", 0, ("continuation",))) > 3000


def test_the_char_cap_cuts_oldest_chunks_then_the_newest_front_then_the_base():
    from nodes.steps.s04_prepare_context import _capped

    drops: list[str] = []
    assert _capped(["seed ", "a" * 10, "b" * 10, "c" * 10], 30, drops) == ["seed ", "b" * 10, "c" * 10]
    assert _capped(["seed ", "a" * 10, "b" * 40], 30, drops) == ["seed ", "b" * 25]
    assert _capped(["s" * 40, "a" * 10], 30, drops) == ["s" * 30]
    assert len(drops) == 5


def test_distillation_terminates_when_summaries_do_not_shrink(agent_factory):
    from nodes.steps.s03_compress_context import distill

    fake = FakeLLM("fake", responses=lambda p: "x " * 400, context_window=600)  # never shorter than its input
    agent = agent_factory(fake)
    summary, calls = distill("word " * 4000, agent.services, {})
    assert summary and 1 < calls < 100


def test_config_yaml_cycle_pause_is_the_pause_until_the_persona_chooses_its_own(agent_factory):

    agent = agent_factory(cycle={"pause_s": 2.5})
    assert agent.tick()["pause_s"] == 2.5
    with agent.services.db.unit() as repos:
        managers_over(repos).loop.update_cycle(agent.thread_id, pause_s=0.0)  # what cycle.pause 0 stores
    assert agent.tick()["pause_s"] == 0.0
