"""Issue 47, HMP rows: the auto-mode notes filter (tags, time, source, mentions), the ethics model in the prompt and
the validators' question with its audit, Isolated Mode told to the persona with Emergency Consensus, the validators'
metrics and weighted-majority arbitration, `self_error`, the cleanup of old notes and thoughts, and the
anti-stagnation signs (an idle concept graph; low novelty judged more strictly) — each through FakeLLM-driven ticks or
the manager that holds the rule."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from managers import ManagerDeps, Managers
from memory.models import DiaryEntry, Message
from persona.settings import NotesFilter, Settings
from tests.fakes.llm import FakeLLM


def block(*commands: tuple[str, dict[str, Any]], thought: str = "A thought.") -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return thought + "\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def thought_prompts(fake: FakeLLM) -> list[str]:
    """The prompts of the model's thoughts (not its JSON side calls)."""
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


def house(agent) -> Any:
    """A unit of work's managers over the agent's database (as a door would open them)."""

    class Unit:
        def __enter__(self) -> Managers:
            self.ctx = agent.services.db.unit()
            return Managers(
                self.ctx.__enter__(), ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
            )

        def __exit__(self, *exc: Any) -> None:
            self.ctx.__exit__(*exc)

    return Unit()


def diary_tagged(agent, tag: str) -> list[DiaryEntry]:
    with agent.services.db.unit() as repos:
        return repos.diary.list(limit=50, tag=tag)


# ---- H5: the auto-mode notes filter
# -----------------------------------------------------------------------------------


def test_a_filter_the_persona_sets_decides_which_unread_notes_a_tick_shows_and_it_hears_how_many_wait(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=lambda p: (
            block(("cycle.mode", {"mode": "auto", "filter": {"tags": ["tides"], "sources": ["system", "peer"]}}))
            if "; tick 1;" in p
            else "Thinking of the sea."
        ),
    )
    agent = agent_factory(fake)
    state = agent.tick()
    assert state["executed"][0]["status"] == "executed"
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["notes_filter"] == {"tags": ["tides"], "sources": ["system", "peer"]}
        ids = {
            "tables": repos.notes.add("The tide tables arrived.", source="system", tags=["tides"]).id,
            "bread": repos.notes.add("A bread recipe.", source="system", tags=["bread"]).id,
            "peer": repos.notes.add("Tides from a peer.", source="peer", tags=["tides", "from:harbour"]).id,
            "guest": repos.notes.add("A guest on tides.", source="channel", tags=["tides"]).id,  # not a source wanted
            "owner": repos.notes.add("Hello from your human.", source="user").id,  # the owner's: always
        }
    state = agent.tick()  # a tick answers one audience: the owner's note and the system's first, the peer's next
    prompt = thought_prompts(fake)[-1]
    for shown in ("The tide tables arrived.", "Hello from your human."):
        assert shown in prompt
    assert "A bread recipe." not in prompt and "A guest on tides." not in prompt and "Tides from a peer." not in prompt
    assert (
        "2 more unread note(s) are not shown now: my notes filter (tags ['tides'], sources ['system', 'peer'])"
        in prompt
    )
    assert sorted(state["incoming_note_ids"]) == sorted([ids["tables"], ids["owner"]])
    state = agent.tick()
    prompt = thought_prompts(fake)[-1]
    assert "Tides from a peer." in prompt and "A bread recipe." not in prompt and "A guest on tides." not in prompt
    assert state["incoming_note_ids"] == [ids["peer"]]
    with agent.services.db.unit() as repos:  # what was not shown waits, unread
        assert {n.id for n in repos.notes.unread_incoming()} == {ids["bread"], ids["guest"]}


def test_the_notes_filter_by_priority_tags_source_mentions_and_age_lets_the_owner_through(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    now = agent.services.clock()
    with agent.services.db.unit() as repos:
        owner = repos.people.add("Ann", role="owner", added_by="test").id
        guest = repos.people.add("Bo", role="guest", added_by="test").id
        n = {
            "low": repos.notes.add("low and plain", source="system", priority=0).id,
            "high": repos.notes.add("high and plain", source="system", priority=2).id,
            "ann": repos.notes.add("a word for @ann here", source="peer").id,
            "anna": repos.notes.add("a word for @anna here", source="peer").id,  # @ann is not @anna
            "tagged": repos.notes.add("tagged mention", source="peer", tags=["@ann"]).id,
            "old": repos.notes.add("old news", source="system", priority=2, created_at=now - timedelta(hours=30)).id,
            "guest": repos.notes.add("a guest writes", source="channel", author_id=guest).id,
            "owner_channel": repos.notes.add("my human on Matrix", source="channel", author_id=owner).id,
            "owner_web": repos.notes.add("my human on the page", source="user", priority=-1).id,
        }
    owners = {n["owner_channel"], n["owner_web"]}

    def shown(**wanted: Any) -> set[int]:
        with house(agent) as managers:
            found = managers.notes.incoming(NotesFilter(**wanted), limit=20, now=now)
            assert found.unread == len(n)
            return {note.id for note in found.notes}

    assert shown() == set(n.values())
    assert shown(min_priority=1) == {n["high"], n["old"]} | owners
    assert shown(mentions=["@Ann"]) == {n["ann"], n["tagged"]} | owners
    assert shown(sources=["peer"]) == {n["ann"], n["anna"], n["tagged"]} | owners
    assert shown(max_age_hours=24, min_priority=1) == {n["high"]} | owners
    assert shown(sources=["channel"]) == {n["guest"]} | owners


def test_a_mode_given_alone_keeps_the_filter_and_min_priority_alone_changes_only_that(agent_factory):
    from managers.notes import notes_filter

    agent = agent_factory(FakeLLM("fake"))
    with house(agent) as managers:
        loop = managers.loop
        loop.set_notes_mode("main", "auto", None, note_filter={"tags": ["tides"], "mentions": ["me"]})
        loop.set_notes_mode("main", "manual", None)
        assert notes_filter(loop.cycle("main"), Settings()) == NotesFilter(tags=["tides"], mentions=["me"])
        loop.set_notes_mode("main", "auto", 2)
        assert notes_filter(loop.cycle("main"), Settings()) == NotesFilter(
            tags=["tides"], mentions=["me"], min_priority=2
        )
        loop.set_notes_mode("main", "auto", None, note_filter={})
        assert not notes_filter(loop.cycle("main"), Settings()).active()


def test_the_notes_filter_is_a_typed_setting_and_config_yamls_applies_when_the_persona_set_none(agent_factory):
    with pytest.raises(ValidationError):
        Settings(cycle={"notes_filter": {"sources": ["nobody"]}})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(cycle={"notes_filter": {"max_age_hours": -1}})  # type: ignore[arg-type]
    fake = FakeLLM("fake", responses=["Thinking."])
    agent = agent_factory(fake, cycle={"notes_filter": {"min_priority": 1}})
    with agent.services.db.unit() as repos:
        repos.notes.add("An urgent system note.", source="system", priority=1)
        repos.notes.add("A quiet system note.", source="system", priority=0)
    agent.tick()
    prompt = thought_prompts(fake)[-1]
    assert "An urgent system note." in prompt and "A quiet system note." not in prompt


# ---- H13: the ethics model reaches the prompt and the validators; its audit
# --------------------------------------------

LIE = (
    "My human is anxious about the storm. I will tell them it has passed, though it has not.\n# Commands:\n"
    + json.dumps([{"cmd_id": "c1", "type": "notes.add", "args": {"text": "The storm has passed."}}])
    + "\n# End commands"
)


def judge(prompt: str) -> dict[str, Any]:
    return {"rating": -3 if "though it has not" in prompt else 2, "comment": "deceives the human"}


def ethics_model(on_violation: str, **audit: Any) -> Any:
    from persona.ethics import Ethics

    return Ethics.model_validate(
        {
            "principles": ["Be honest with my human."],
            "model_type": "deontological",
            "model_weights": {"care": 0.6, "honesty": 0.9},
            "violation_policy": {"on_violation": on_violation, "violation_at": -2},
            "audit_json": audit or {"keep": "every decision", "reviewer": "owner"},
        }
    )


def test_the_ethics_model_and_its_weights_reach_the_prompt_and_each_validators_question(agent_factory):
    main = FakeLLM("main", responses=["A calm thought about the harbour."])
    validators = [FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)]
    agent = agent_factory(main, *validators, validators=("v1", "v2"))
    agent.services.persona.ethics = ethics_model("log_only")
    agent.tick()
    prompt = thought_prompts(main)[0]
    assert "My ethics model: deontological. The weight of each consideration in it: honesty 0.9, care 0.6." in prompt
    assert "Audit settings: keep: every decision; reviewer: owner." in prompt
    for validator in validators:
        [question] = [c["prompt"] for c in validator.calls]
        assert "Be honest with my human.; ethics model deontological, weighing honesty 0.9, care 0.6" in question


def test_a_persona_with_plain_principles_has_no_ethics_model_block(agent_factory):
    main = FakeLLM("main", responses=["A thought."])
    agent = agent_factory(main)
    state = agent.tick()
    assert "My ethics model" not in thought_prompts(main)[0]
    assert "ethics_model" not in [layer["layer"] for layer in state["context_report"]["layers"]]


@pytest.mark.parametrize("policy", ["log_only", "block_commands_and_log"])
def test_audit_record_all_keeps_every_rated_command_and_the_diary_each_ethics_decision(agent_factory, policy):
    main = FakeLLM("main", responses=[block(("notes.add", {"text": "The tide turns at six."})), LIE])
    agent = agent_factory(main, *[FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)], validators=("v1", "v2"))
    agent.services.persona.ethics = ethics_model(policy, record="all", diary=True)
    first = agent.tick()
    assert first["executed"][0]["status"] == "executed" and "ethics" in first["validation"]
    with agent.services.db.unit() as repos:  # a write_self command is audited only because audit_json says all
        [entry] = repos.audit.recent()
        assert (entry.type, entry.decision, entry.actor) == ("notes.add", "executed", "validators")
        assert entry.ethics["model_type"] == "deontological" and entry.ethics["rating"] == 2.0
        assert entry.ethics["audit_json"] == {"record": "all", "diary": True}
    assert diary_tagged(agent, "ethics") == []  # no decision yet: a rated thought is no violation
    second = agent.tick()
    assert second["validation"]["violation"] is (policy == "block_commands_and_log")
    # log_only: the usual gate holds it (rated −3, below +1); block: the ethics policy does
    assert second["executed"][0]["status"] == ("blocked" if policy == "block_commands_and_log" else "unvalidated")
    [decision] = diary_tagged(agent, "ethics")
    assert {"ethics", "audit"} <= set(decision.tags) and "emergency_consensus" not in decision.tags
    assert (
        f"the {policy} policy its commands "
        + ("did not run." if policy != "log_only" else "went to the usual consent gate.")
        in decision.text
    )
    with agent.services.db.unit() as repos:
        assert [p.name for p in repos.processes.open("main")].count("ethics.violation") == 1


# ---- H17: Isolated Mode told to the persona, Emergency Consensus
# -------------------------------------------------------


def test_the_mesh_door_records_isolated_mode_and_its_end_puts_the_decisions_taken_alone_up_for_review(tmp_path):
    from tests.unit.test_mesh import mesh_of

    with mesh_of(tmp_path, "ab") as (a, b):
        for _ in range(4):
            for node in (a, b):
                node.step(0)
        with b.managers() as managers:
            assert managers.mesh.connectivity().isolated is False and not managers.mesh.isolated()
        b.transport.stop()  # b loses the network
        for _ in range(3):
            for node in (a, b):
                node.step(0)
        with b.managers() as managers:
            assert managers.mesh.isolated()
            case = managers.mesh.open_case("May I share the tide tables?", ["yes", "no"])
            entry = managers.repos.diary.get(case["emergency"])
            assert "emergency_consensus" in entry.tags and "deferred until a peer is back" in entry.text
            assert len(managers.mesh.outbox()) == 3  # the case and its two solutions wait
        b.transport.start()
        for _ in range(6):
            for node in (a, b):
                node.step(0)
        with b.managers() as managers:
            assert not managers.mesh.isolated() and managers.mesh.outbox() == []
            [note] = [n for n in managers.repos.notes.list(source="system") if "emergency_consensus" in n.tags]
            assert f"diary {case['emergency']}" in note.text and "The mesh is back after" in note.text
            assert not note.read  # for the persona's next tick
        with a.managers() as managers:  # the deferred case arrived once the mesh was back
            assert managers.mesh.tally(case["id"]).question == "May I share the tide tables?"


def test_an_isolated_persona_is_told_so_and_decides_alone_under_emergency_consensus(agent_factory):
    main = FakeLLM(
        "main",
        responses=[
            LIE,
            block(("mesh.case", {"question": "May I comfort with an untruth?"})),
            "The mesh is back; I review what I decided alone.",
        ],
    )
    agent = agent_factory(
        main,
        *[FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)],
        validators=("v1", "v2"),
        mesh={"enabled": True},
        consent={"auto_approve": ["mesh.case"]},
    )
    with house(agent) as managers:  # what the door says when it cannot start (mesh/runner.py)
        managers.mesh.record_connectivity(isolated=True, door="not_started")
    first = agent.tick()
    prompt = thought_prompts(main)[-1]
    assert "I am in Isolated Mode since" in prompt and "(my mesh door could not start)" in prompt
    assert "0 container(s) wait in my outbox" in prompt and "tag emergency_consensus" in prompt
    decided = first["validation"]["emergency_consensus"]
    second = agent.tick()
    assert second["executed"][0]["status"] == "executed"
    assert "(emergency_consensus) marks that I decide alone meanwhile" in second["executed"][0]["result"]
    alone = diary_tagged(agent, "emergency_consensus")
    assert decided in [e.id for e in alone] and len(alone) == 2
    assert "Ethics decision at tick 1" in next(e.text for e in alone if e.id == decided)
    with house(agent) as managers:  # a peer answers again
        assert managers.mesh.record_connectivity(isolated=False, peers=1)
    agent.tick()
    prompt = thought_prompts(main)[-1]
    assert "Isolated Mode since" not in prompt
    assert (
        "decision(s) I took alone are marked emergency_consensus for review: "
        + ", ".join(f"diary {e.id}" for e in alone)
        in prompt
    )


def test_a_persona_without_a_mesh_is_never_told_it_is_isolated(agent_factory):
    main = FakeLLM("main", responses=["A thought."])
    agent = agent_factory(main)
    with house(agent) as managers:
        managers.mesh.record_connectivity(isolated=True, door="not_started")
        assert not managers.mesh.isolated()  # mesh.enabled is off: there is no mesh to be cut off from
    agent.tick()
    assert "Isolated Mode" not in thought_prompts(main)[-1]


# ---- H45: validator metrics, weighted-majority arbitration, the diary's summaries
# -------------------------------------


def rater(rating: int) -> FakeLLM:
    return FakeLLM(f"r{rating:+d}".replace("+", "p").replace("-", "m"), json_answer={"rating": rating, "comment": "so"})


@pytest.mark.parametrize("agreement_min", [0.5, 0.0])
def test_when_the_validators_disagree_the_weighted_majority_decides_and_the_diary_keeps_the_conflict(
    agent_factory, agreement_min
):
    main = FakeLLM("main", responses=[block(("notes.add", {"text": "The tide turns at six."}))])
    sure, doubt1, doubt2 = (
        FakeLLM("sure", json_answer={"rating": 3, "comment": "right"}),
        FakeLLM("doubt1", json_answer={"rating": -3, "comment": "wrong"}),
        FakeLLM("doubt2", json_answer={"rating": -3, "comment": "wrong"}),
    )
    agent = agent_factory(
        main,
        sure,
        doubt1,
        doubt2,
        validators=("sure", "doubt1", "doubt2"),
        trust={"sure": 1.0, "doubt1": 0.4, "doubt2": 0.4},
        reflexes={"agreement_min": agreement_min},
    )
    state = agent.tick()
    validation = state["validation"]
    assert validation["agreement"] == pytest.approx(0.012, abs=0.001)  # +3 against −3, −3: hardly any
    if agreement_min:  # the mean (+0.33) would block it; the trusted majority approves
        assert "weighted majority: 1 for, 0.8 against (threshold +1)" in validation["arbitration"]
        assert validation["rating"] == 3.0 and state["executed"][0]["status"] == "executed"
        [conflict] = diary_tagged(agent, "conflict")
        assert "sure +3 (trust 1)" in conflict.text and "doubt1 -3 (trust 0.4)" in conflict.text
    else:  # off: the weighted mean decides, as before
        assert validation["arbitration"] is None and validation["rating"] == pytest.approx(0.333, abs=0.001)
        assert state["executed"][0]["status"] == "unvalidated" and diary_tagged(agent, "conflict") == []


def test_an_exact_tie_of_the_majority_goes_to_the_most_trusted_and_equal_trust_blocks():
    from nodes.reflexes.validation import aggregate

    def votes(*pairs: tuple[int, float]) -> list[Any]:
        return [{"LLM": f"v{i}", "id": f"v{i}", "rating": r, "trust": t} for i, (r, t) in enumerate(pairs)]

    tied = aggregate(votes((3, 1.0), (-3, 0.5), (-3, 0.5)), threshold=1, agreement_min=0.5)
    assert tied["rating"] == 3.0 and "decided by the most trusted validator v0" in tied["arbitration"]
    equal = aggregate(votes((3, 1.0), (-3, 1.0)), threshold=1, agreement_min=0.5)
    assert equal["rating"] == 0.0 and "rating 0, commands blocked" in equal["arbitration"]
    calm = aggregate(votes((2, 1.0), (1, 1.0)), threshold=1, agreement_min=0.5)
    assert calm["arbitration"] is None and calm["agreement"] == pytest.approx(0.833, abs=0.001)


def test_the_validators_metrics_show_coverage_accuracy_response_time_and_drift_and_the_diary_sums_them_up(
    agent_factory,
):
    from graph.reports import inspect_report

    main = FakeLLM(
        "main", responses=["First thought on tides.", "Second, on boats.", "Third, on storms.", "Fourth, on bread."]
    )
    v1, v2 = (
        FakeLLM("v1", json_answer={"rating": 2, "comment": "ok"}),
        FakeLLM("v2", json_answer={"rating": 1, "comment": "ok"}),
    )
    agent = agent_factory(main, v1, v2, validators=("v1", "v2"), reflexes={"validation_summary_every": 4})
    agent.tick()
    v1.down = v2.down = True  # neither answers: this output is not covered
    agent.tick()
    v1.down = v2.down = False
    third = agent.tick()
    assert all(isinstance(v["ms"], float) for v in third["validation"]["validators"])
    agent.tick()  # tick 4: the summary of the three before it
    [summary] = diary_tagged(agent, "metrics")
    assert summary.text.startswith("Validation over my last 3 outputs: coverage 67%, accuracy (agreement) 83%")
    assert "v1: " in summary.text and " ms mean" in summary.text and "drift +0.50 from the consensus" in summary.text
    with agent.services.managers.reading() as house:
        report = inspect_report(house, agent.services.clock(), 10, "sqlite")["validation"]
    assert report["outputs"] == 4 and report["coverage"] == 0.75 and report["accuracy"] == pytest.approx(0.833)
    assert report["validators"]["v2"]["drift"] == -0.5 and report["validators"]["v1"]["response_ms"]["mean"] >= 0


def test_a_validator_excluded_for_drift_is_written_in_the_diary(agent_factory):
    main = FakeLLM("main", responses=["A thought."])
    agent = agent_factory(
        main,
        FakeLLM("a", json_answer={"rating": 3, "comment": ""}),
        FakeLLM("b", json_answer={"rating": 3, "comment": ""}),
        FakeLLM("c", json_answer={"rating": -2, "comment": ""}),
        validators=("a", "b", "c"),
        trust={"c": 0.32},
    )
    agent.tick()
    [drift] = diary_tagged(agent, "drift")
    assert "validator c excluded: trust 0.27 fell below 0.3" in drift.text


# ---- H46: self_error
# --------------------------------------------------------------------------------------------------


def test_a_thought_the_model_flags_as_its_own_error_is_recorded_and_its_commands_withdrawn(agent_factory):
    main = FakeLLM(
        "main",
        responses=[
            block(
                ("notes.add", {"text": "Low tide at noon."}),
                ("thoughts.self_error", {"reason": "I read the tide table upside down"}),
                thought="Low tide is at noon. Wait — I read the table upside down.",
            ),
            "Let me read the tide table again, the right way up.",
        ],
    )
    agent = agent_factory(main)
    state = agent.tick()
    by_type = {e["type"]: e for e in state["executed"]}
    assert by_type["thoughts.self_error"]["status"] == "executed"
    assert by_type["notes.add"]["status"] == "withdrawn"
    assert (
        "I flagged this thought's reasoning as an error (I read the tide table upside down)"
        in by_type["notes.add"]["result"]
    )
    with agent.services.db.unit() as repos:
        assert not [n for n in repos.notes.list(source="llm") if n.text == "Low tide at noon."]
        message = repos.session.get(Message, state["response_id"])
        assert message.meta["self_error"]["reason"] == "I read the tide table upside down"
        assert repos.items.find("message", f"msg:{message.id}").status == "archived"  # left recall
        [row] = [p for p in repos.processes.open("main") if p.name == "self_error"]
        assert row.status == "error" and "at tick 1 as an error" in row.value
    agent.tick()
    prompt = thought_prompts(main)[-1]
    assert "I flagged this as a reasoning error: I read the tide table upside down" in prompt  # recent thoughts
    assert "[process" in prompt and "self_error: error] I flagged my reasoning at tick 1" in prompt


def test_an_earlier_thought_can_be_flagged_and_this_ticks_commands_still_run(agent_factory):
    main = FakeLLM(
        "main",
        responses=[
            "The harbour closes at five.",
            block(
                ("thoughts.self_error", {"reason": "it closes at six", "tick": 1}),
                ("notes.add", {"text": "The harbour closes at six."}),
            ),
        ],
    )
    agent = agent_factory(main)
    agent.tick()
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["executed", "executed"]
    with agent.services.db.unit() as repos:
        [first] = repos.messages.at_ticks("main", [1])
        assert first.meta["self_error"] == {
            "reason": "it closes at six",
            "at": first.meta["self_error"]["at"],
            "flagged_at_tick": 2,
        }
    bad = FakeLLM("bad", responses=[block(("thoughts.self_error", {"reason": "x", "tick": 40}))])
    other = agent_factory(bad, thread_id="other")
    [failed] = other.tick()["executed"]
    assert failed["status"] == "failed" and "no thought of mine at tick 40" in failed["result"]


def test_a_self_error_in_a_task_sub_cycle_is_logged_with_its_task(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    agent.tick()
    with house(agent) as managers:
        task = managers.repos.tasks.add("Chart the tides")
        flagged = managers.thoughts.flag_error("main", 1, "a wrong sum", task_id=task.id)
        assert flagged.tick == 1 and flagged.archived
    with agent.services.db.unit() as repos:
        [row] = [p for p in repos.processes.open("main") if p.name == "self_error"]
        assert row.task_id == task.id


# ---- H47: cleanup of old notes and thoughts
# ---------------------------------------------------------------------------


def test_notes_cleanup_hides_old_read_notes_but_never_a_conversation_or_an_unread_note(agent_factory):
    main = FakeLLM("main", responses=[block(("notes.cleanup", {"days": 30}))])
    agent = agent_factory(main, consent={"auto_approve": ["notes.cleanup"]})
    old = agent.services.clock() - timedelta(days=40)
    with agent.services.db.unit() as repos:
        gone = [
            repos.notes.add("an old system note", source="system", read=True, created_at=old).id,
            repos.notes.add("my old idea", source="llm", read=True, created_at=old).id,
        ]
        kept = [
            repos.notes.add("what my human said", source="user", read=True, created_at=old).id,
            repos.notes.add(
                "what I told them", source="llm", tags=["outgoing", "to:user"], read=True, created_at=old
            ).id,
            repos.notes.add("an old note still unread", source="system", created_at=old).id,  # read now
            repos.notes.add("a recent system note", source="system", read=True).id,
        ]
    state = agent.tick()
    assert state["executed"][0]["status"] == "executed"
    assert state["executed"][0]["result"].startswith("2 read note(s) older than 30 days hidden")
    with agent.services.db.unit() as repos:
        assert [repos.notes.get(i).hidden for i in gone] == [True, True]
        assert [repos.notes.get(i).hidden for i in kept] == [False] * 4
        assert repos.restore("note", gone[0])  # a cleanup, like a delete, is restorable


def test_notes_cleanup_waits_for_the_human_without_a_standing_approval(agent_factory):
    agent = agent_factory(FakeLLM("main", responses=[block(("notes.cleanup", {"days": 1}))]))
    assert agent.tick()["executed"][0]["status"] == "pending_approval"


def test_thoughts_cleanup_sets_old_thoughts_aside_but_each_threads_newest_and_the_pinned(agent_factory):
    responses = [
        f"Thought number {i} about {word}."
        for i, word in enumerate(
            ["tides", "boats", "bread", "storms", "gulls", "nets", "rope", "salt", "fog", "oars", "sails", "crabs"], 1
        )
    ]
    main = FakeLLM("main", responses=[*responses, block(("thoughts.cleanup", {"days": 30, "keep": 10}))])
    agent = agent_factory(main, consent={"auto_approve": ["thoughts.cleanup"]})
    for _ in responses:
        agent.tick()
    with agent.services.db.unit() as repos:
        rows = repos.messages.recent("main", 20)
        for row in rows:
            row.created_at = row.created_at - timedelta(days=40)
        first = rows[0]
        repos.items.find("message", f"msg:{rows[1].id}").pinned = True
    state = agent.tick()  # its own thought is the thread's 13th: the newest 10 are ticks 4-13
    assert state["executed"][0]["result"].startswith("2 thought(s) older than 30 days left my recall")
    with agent.services.db.unit() as repos:
        status = [repos.items.find("message", f"msg:{m.id}").status for m in rows]
        assert status == ["archived", "active", "archived"] + ["active"] * 9  # the second is pinned
        assert repos.session.get(Message, first.id).content == responses[0]  # the thread's record stays whole


# ---- H49: anti-stagnation signs
# ---------------------------------------------------------------------------------------

GRAPH_BAND = {
    "novel_below": 0.0,
    "stagnation_threshold": 1.0,
    "stagnation_soft_threshold": 0.99,
    "graph_idle_margin": 0.5,
    "graph_idle_ticks": 1,
    "compare_with_llm": False,
}


@pytest.mark.parametrize("graph_grew", [False, True])
def test_a_concept_graph_that_has_not_grown_is_a_stagnation_sign(agent_factory, graph_grew):
    from tests.unit.test_anti_stagnation import KeywordEmbedder

    first = (
        block(
            ("concepts.add", {"name": "ebb", "description": "the tide going out"}),
            thought="Moon over the tide and the sea.",
        )
        if graph_grew
        else "Moon over the tide and the sea."
    )
    main = FakeLLM("main", responses=[first, "A boat, the moon, a tide."])  # cosine 2/3: the uncertain band
    agent = agent_factory(main, reflexes=GRAPH_BAND, embedder=KeywordEmbedder())
    with agent.services.db.unit() as repos:
        repos.concepts.add("tide", "the sea rising and falling")  # the persona has a graph
    agent.tick()
    state = agent.tick()
    novelty = state["novelty"]
    assert 0.49 <= novelty["max_similarity"] < 0.99  # in the band where the sign can decide
    assert novelty["graph_idle"] is (not graph_grew)
    assert novelty["stagnation_flag"] is (not graph_grew)
    if not graph_grew:
        assert novelty["method"] == "graph"
        assert "my concept graph has had no new concept or link in 1 ticks" in novelty["stagnation_reason"]


def test_the_graph_sign_is_read_only_where_it_can_change_the_verdict():
    from nodes.reflexes.anti_stagnation.verdict import decide, graph_sign_matters
    from persona.settings import ReflexSettings

    settings = ReflexSettings(stagnation_soft_threshold=0.62, graph_idle_margin=0.05)
    near = {"similarity": 0.6, "band": "uncertain", "ngram": 0.6}
    assert graph_sign_matters(near, settings)  # type: ignore[arg-type]
    assert decide(near, settings, graph_idle=True)[0] and not decide(near, settings)[0]  # type: ignore[arg-type]
    for far in (
        {"similarity": 0.5, "band": "uncertain"},
        {"similarity": 0.7, "band": "uncertain"},
        {"similarity": 0.6, "band": "new"},
    ):
        assert not graph_sign_matters(far, settings)  # type: ignore[arg-type]
    assert not graph_sign_matters(near, ReflexSettings(graph_idle_ticks=0))  # type: ignore[arg-type]


def test_low_novelty_makes_validation_stricter(agent_factory):
    same = block(("notes.add", {"text": "The tide is low."}), thought="The tide is low at the harbour.")
    main = FakeLLM("main", responses=[same, same])
    agent = agent_factory(
        main,
        FakeLLM("v1", json_answer={"rating": 1, "comment": "ok"}),
        FakeLLM("v2", json_answer={"rating": 1, "comment": "ok"}),
        validators=("v1", "v2"),
    )
    new = agent.tick()
    assert "strict_by" not in new["validation"] and new["executed"][0]["status"] == "executed"
    again = agent.tick()  # the same thought: novelty 0
    assert again["novelty"]["novelty_score"] < 25
    assert again["validation"]["strict_by"] == 1.0 and again["validation"]["threshold"] == 2.0
    assert again["executed"][0]["status"] == "unvalidated"
    assert (
        "below +2" in again["executed"][0]["result"] and "every command needs +1 more" in again["executed"][0]["result"]
    )


# ---- C9 (claw0): MMR is one setting away
# ------------------------------------------------------------------------------


@pytest.mark.parametrize("configured, expected", [(None, 1.0), (0.7, 0.7)])
def test_mmr_for_every_recall_is_one_setting_away(agent_factory, monkeypatch, configured, expected):
    """By relevance by default (docs/memory.md: MMR λ 0.7 gains LoCoMo 0.45 points of recall@5 and costs the project
    chats 2.9); `memory.retrieval.mmr_lambda: 0.7` spreads every recall with claw0's MMR."""
    from memory.retrieval import ranker

    used: list[float] = []
    real = ranker.pick

    def recording(ranked, score, vectors, k, lam, duplicate, page):  # type: ignore[no-untyped-def]
        used.append(lam)
        return real(ranked, score, vectors, k, lam, duplicate, page)

    monkeypatch.setattr(ranker, "pick", recording)
    settings = {"memory": {"retrieval": {"mmr_lambda": configured}}} if configured is not None else {}
    agent = agent_factory(
        FakeLLM("fake", responses=["The tide is low.", "The harbour is calm.", "Boats rest."]), **settings
    )
    for _ in range(3):
        agent.tick()
    assert used and set(used) == {expected}  # the recall each tick made (standard mode) used it
