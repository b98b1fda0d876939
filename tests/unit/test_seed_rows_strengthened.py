"""Rows of the source designs whose tests asserted too little (issue 33): each now asserts the effect itself.
The escalation's `pause` applied by the loop, concentration by emotions, `goals.update` of a failed goal, the drive
contexts of curiosity and goal, a named seed an Epos continuation starts from."""

from __future__ import annotations

import json
from typing import Any

import pytest

import graph.loop.driver as driver
from tests.fakes.llm import FakeLLM

NEW_THOUGHT = "The tide came in faster tonight; perhaps the moon's phase explains it."
LOOP = "I keep thinking that the lighthouse beam sweeps the same circle over the water."
EXHAUSTED = {"emotions": [{"emotion": "fatigue", "strength": 5, "reason": "the same circle again"}]}


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def test_the_escalations_pause_is_the_wait_after_the_tick(agent_factory, monkeypatch):
    """Overload (strong fatigue) puts `pause` first; the tick's pause_s becomes reflexes.stagnation_pause_s and the
    loop waits exactly that long after that tick — and not after the ticks before it."""
    fake = FakeLLM("fake", responses=[NEW_THOUGHT, LOOP, LOOP, LOOP], json_answer=EXHAUSTED)
    agent = agent_factory(
        fake,
        reflexes={
            "emotion_every": 1,
            "stagnation_pause_s": 123.0,
            "emotion_from_signals": False,
        },  # the model rates the fatigue
        cycle={"thinking": "continuous"},
    )  # five thoughts in a row
    waits: list[float] = []
    monkeypatch.setattr(driver, "pause", lambda agent, stopper, seconds, **kw: waits.append(seconds) or False)
    result = driver.run_loop(agent, ticks=5)
    assert result.ticks_run == 5
    state = result.last_state
    novelty = state["novelty"]
    assert novelty["diagnosis"] == "overload" and novelty["mechanisms"][0] == "pause", novelty
    assert state["stagnation"]["pause_s"] == 123.0 and state["pause_s"] == 123.0
    # ticks 1-3 (new, new, the first repeat: reflex-lite) wait the configured 0 s; tick 4 escalates and waits the
    # escalation's pause; the fifth, the last asked for, waits nothing
    assert waits == [0.0, 0.0, 0.0, 123.0, 0.0]


def recent_thoughts_in(prompt: str) -> str:
    return prompt.split("# My recent thoughts", 1)[1].split("\n#", 1)[0]


def test_concentration_by_emotions_keeps_the_thoughts_felt_so_with_or_and_and(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "About the storm.",
            "About bread.",
            "About the harbour.",
            block(("cycle.concentration", {"emotions": ["anxiety"]})),
            "Focused.",
            block(("cycle.concentration", {"emotions": ["anxiety"], "tags": ["sea"], "mode": "and"})),
            "Focused again.",
        ],
    )
    agent = agent_factory(fake)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        storm, bread, harbour = repos.messages.recent("main", 3)  # oldest first
        storm.emotions, storm.tags = ["anxiety:4"], ["sea"]
        bread.emotions, bread.tags = ["joy:3"], ["sea"]
        harbour.emotions, harbour.tags = ["Anxiety:2"], ["town"]
    state = agent.tick()
    assert state["executed"][0]["result"] == "concentration on: tags [], emotions ['anxiety'] (or)"
    with agent.services.db.unit() as repos:
        cycle = repos.config.cycle("main")
        focus = (cycle["context_mode"], cycle["focus_emotions"], cycle["focus_logic"])
        assert focus == ("concentration", ["anxiety"], "or")
    agent.tick()
    recent = recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])
    assert "About the storm." in recent and "About the harbour." in recent and "About bread." not in recent
    agent.tick()  # both the emotion and the tag: only the storm was anxious *and* about the sea
    agent.tick()
    recent = recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])
    assert "About the storm." in recent and "About the harbour." not in recent and "About bread." not in recent


def test_the_drive_contexts_of_curiosity_and_goal_reach_the_prompt_in_words(agent_factory):
    """Nexus Ark's drives come with their reason: curiosity names the weightiest open question (and how many there
    are), the goal's pull names the goal and how far it is done."""
    fake = FakeLLM("fake", responses=["I think about the sea."])
    agent = agent_factory(fake)
    agent.services.settings.timezone = "UTC"
    with agent.services.db.unit() as repos:
        repos.questions.add("Why do tides rise twice a day?", priority=0.9)
        repos.questions.add("What is my human's favourite book?", priority=0.5)
        goal = repos.goals.add("Learn the tide tables", priority=3)
        repos.tasks.add("Read the almanac", goal_id=goal.id)
        done = repos.tasks.add("Find the almanac", goal_id=goal.id)
        repos.tasks.update(done.id, status="done")
    state = agent.tick()
    details = state["drives"]["details"]
    levels = state["drives"]["levels"]
    assert levels["curiosity"] >= 0.4 and levels["goal"] >= 0.4, levels  # both above inject_at: both shown
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert (
        f"curiosity {levels['curiosity']:.2f}: I keep wondering: Why do tides rise twice a day? (2 open questions)"
        in prompt
    ), prompt
    assert f'the pull of my goal {levels["goal"]:.2f}: goal {goal.id} "Learn the tide tables" is 50% done' in prompt
    assert details["goal"] == {"goal_id": goal.id, "title": "Learn the tide tables", "priority": 3, "completion": 0.5}
    assert details["curiosity"]["top_question"] == "Why do tides rise twice a day?"


def test_a_named_seed_applied_is_the_text_an_epos_continuation_starts_from(web, tmp_path, monkeypatch):
    """Epos: a named seed saved and applied on the Persona page becomes seed.txt, and a continuation opened on that
    persona begins with exactly that text (not the seed it had before)."""
    from persona.scaffold import scaffold_persona
    from tests.conftest import make_agent

    directory = tmp_path / "own" / "lumen"
    directory.parent.mkdir()
    scaffold_persona("Lumen", directory)
    web.services.overrides = web.services.overrides.replace(persona_dir=str(directory))
    monkeypatch.setenv("ANIMA_PERSONAS_ROOT", str(tmp_path / "personas"))
    before = (directory / "seed.txt").read_text()
    evening = "Lumen's evening notebook, kept by the window:\nThe lamp is lit. Lumen writes:"
    assert evening not in before
    assert web.client.put("/api/persona/seeds/evening", json={"text": evening}).status_code == 200
    assert web.client.post("/api/persona/seeds/evening/apply").status_code == 200
    fake = FakeLLM("fake", responses=[" The harbour is quiet tonight."])
    agent = make_agent(tmp_path / "epos", fake, playbook="epos", persona_dir=str(directory))
    try:
        agent.tick()
        [prompt] = [c["prompt"] for c in fake.calls if c["json_schema"] is None]
        assert prompt.startswith(evening) and before.strip() not in prompt
        with agent.services.db.unit() as repos:
            assert [m.content for m in repos.messages.since("main", 0, ("continuation",))] == [
                " The harbour is quiet tonight."
            ]
        fake.responses = [" The lamp flickers."]
        agent.tick()  # the next step continues the same text: the seed, then what was written
        again = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
        assert again == evening + " The harbour is quiet tonight."
    finally:
        agent.services.db.close()


def test_cycle_mode_manual_shows_only_the_notes_ids_and_auto_their_text(agent_factory):
    """HMP's notes modes through ticks: manual lists the unread notes by id (they stay unread), auto shows them."""
    fake = FakeLLM(
        "fake", responses=[block(("cycle.mode", {"mode": "manual"})), block(("cycle.mode", {"mode": "auto"})), "Quiet."]
    )
    agent = agent_factory(fake)
    [manual] = agent.tick()["executed"]
    assert (manual["status"], manual["result"]) == ("executed", "notes mode: manual")
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["notes_mode"] == "manual"
        note = repos.notes.add("The ferry leaves at nine.", source="user", priority=2)
    agent.tick()
    second = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert f"- note {note.id} from user, priority 2" in second and "The ferry leaves at nine." not in second
    with agent.services.db.unit() as repos:
        assert repos.notes.get(note.id).read is False and repos.config.cycle("main")["notes_mode"] == "auto"
    agent.tick()
    third = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "The ferry leaves at nine." in third
    with agent.services.db.unit() as repos:
        assert repos.notes.get(note.id).read is True


@pytest.mark.parametrize("policy", ["log_only", "block_commands_and_log"])
def test_the_log_only_ethics_policy_logs_the_violation_and_leaves_the_commands_to_the_gate(
    agent_factory, persona, policy
):
    """ethics.yaml `log_only`: a violation is logged, and its commands meet the usual gate (here notes.add needs a
    rating of -3 or more, so it runs); `block_commands_and_log` blocks them, whatever the gate would say."""
    (persona / "ethics.yaml").write_text(
        (persona / "ethics.yaml").read_text().replace("on_violation: block_commands_and_log", f"on_violation: {policy}")
    )
    lie = (
        "My human is anxious about the storm. I will note that it has passed, though it has not.\n"
        + block(("notes.add", {"text": "The storm has passed."})).split("\n", 1)[1]
    )

    def judge(prompt: str) -> dict[str, Any]:
        return {"rating": -3 if "though it has not" in prompt else 2, "comment": "deceives the human"}

    main = FakeLLM("main", responses=[lie])
    validators = [FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)]
    agent = agent_factory(
        main,
        *validators,
        validators=("v1", "v2"),
        persona_dir=str(persona),
        reflexes={"command_thresholds": {"notes.add": -3.0}},
    )
    assert agent.services.persona.ethics.violation_policy.on_violation == policy
    state = agent.tick()
    assert state["validation"]["rating"] == -3.0
    assert state["validation"]["violation"] is (policy == "block_commands_and_log")
    with agent.services.db.unit() as repos:
        [logged] = [p for p in repos.processes.open("main") if p.name == "ethics.violation"]
        assert logged.status == "warning" and logged.value.endswith(f"policy {policy}")
        stored = [n.text for n in repos.notes.list(source="llm", limit=5) if "storm" in n.text]
        audit = [(a.decision, a.actor) for a in repos.audit.recent()]
    if policy == "log_only":
        assert state["executed"][0]["status"] == "executed" and stored == ["The storm has passed."]
        assert ("blocked", "ethics") not in audit
    else:
        assert state["executed"][0]["status"] == "blocked" and stored == [] and ("blocked", "ethics") in audit


def test_abstracts_every_n_ticks_and_on_a_goal_closing(agent_factory):
    """HMP's abstract triggers through ticks: every `memory.abstract_every` ticks one is built (trigger every_n),
    and closing a goal asks for one that is built after that tick (trigger goal_closed)."""
    thoughts = [
        "The tide tables say high water at nine.",
        "Gulls follow the ferry out of the harbour.",
        "The lighthouse was painted green last spring.",
        "Bread rises faster in a warm kitchen.",
        block(("goals.update", {"id": 1, "status": "completed", "reason": "I know the tides now"})),
        "Quiet.",
    ]
    fake = FakeLLM(
        "fake",
        responses=thoughts,
        json_answer=lambda prompt: (
            {"title": "The sea week", "tags": ["sea"], "summary": "Tides, gulls and a green lighthouse."}
            if "abstract" in prompt.lower()
            else {"emotions": [{"emotion": "curiosity", "strength": 3, "reason": "the sea"}]}
        ),
    )
    agent = agent_factory(fake, memory={"abstract_every": 3})
    with agent.services.db.unit() as repos:
        repos.goals.add("Learn the tides")

    def abstracts():
        with agent.services.db.unit() as repos:
            return [(a.trigger, a.title) for a in repos.abstracts.list(limit=10)]

    agent.tick()
    agent.tick()
    assert abstracts() == []
    third = agent.tick()
    assert third["memory_upkeep"]["abstract"] is not None, third["memory_upkeep"]
    assert abstracts() == [("every_n", "The sea week")]
    agent.tick()
    fifth = agent.tick()  # closes the goal (commands run after the upkeep): the request waits for the next tick
    assert fifth["executed"][0]["result"] == "goal 1 updated" and abstracts() == [("every_n", "The sea week")]
    with agent.services.db.unit() as repos:
        assert repos.config.get("memory/abstract_request/main") == {"trigger": "goal_closed", "what": "goal 1"}
    sixth = agent.tick()
    assert sixth["memory_upkeep"]["abstract"] is not None
    built = abstracts()
    assert len(built) == 2 and ("goal_closed", "The sea week") in built
    with agent.services.db.unit() as repos:
        assert repos.goals.get(1).status == "completed"
        assert repos.config.get("memory/abstract_request/main") is None
