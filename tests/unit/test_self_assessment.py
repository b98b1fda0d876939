"""Confidence tags, the UnverifiedFacts block and the Confidence line: parsing, storage, fact-check tasks."""

import json

from memory.models import Message
from nodes.reflexes.self_assessment import parse_self_assessment
from tests.fakes.llm import FakeLLM

OUTPUT = """The tide rises twice a day. [confidence=0.6]The highest tides are in the Bay of Fundy[/confidence].
UnverifiedFacts: [
  {"id": "f1", "claim": "The moon is 384,400 km away", "context": "distance", "confidence": 0.9,
   "sources": ["NASA"], "why_unverified": "from memory", "priority": 0},
  {"claim": "Tides on Mars are caused by Phobos", "confidence": 0.3, "why_unverified": "a guess", "priority": 2},
  {"claim": "Spring tides follow full moons", "confidence": "40%"}
]
Confidence: 0.75
"""


def test_tags_block_and_overall_confidence_are_parsed_and_stripped_from_the_thought():
    result = parse_self_assessment(OUTPUT)
    assert result.confidence == 0.75 and result.errors == []
    assert [(f["claim"], f["confidence"], f["origin"]) for f in result.facts] == [
        ("The moon is 384,400 km away", 0.9, "block"),
        ("Tides on Mars are caused by Phobos", 0.3, "block"),
        ("Spring tides follow full moons", 0.4, "block"),
        ("The highest tides are in the Bay of Fundy", 0.6, "tag"),
    ]
    assert result.facts[0]["sources"] == ["NASA"] and result.facts[1]["priority"] == 2
    assert result.body == "The tide rises twice a day. The highest tides are in the Bay of Fundy."


def test_malformed_blocks_are_tolerated_and_reported():
    cut = parse_self_assessment(
        'A thought.\nUnverifiedFacts: [{"claim": "Whales sing", "confidence": 0.5}, {"claim": "Fish'
    )
    assert [f["claim"] for f in cut.facts][:1] == ["Whales sing"] and "malformed JSON" in cut.errors[0]
    assert cut.body == "A thought."
    bad = parse_self_assessment(
        'Hm.\nUnverifiedFacts: [{"confidence": 0.2}, {"claim": "x y", "confidence": "sure"}]\nConfidence: high'
    )
    assert bad.errors == [
        "UnverifiedFacts item 1: no claim",
        "UnverifiedFacts item 2: confidence 'sure' is not a number 0..1",
    ]
    assert bad.facts[0]["confidence"] == 0.5 and bad.confidence is None
    assert parse_self_assessment("UnverifiedFacts: none").errors == [
        "UnverifiedFacts: expected a JSON list after the colon"
    ]
    assert parse_self_assessment("Nothing to see.").facts == []


def test_the_tick_stores_facts_and_opens_fact_check_tasks(agent_factory):
    verify = {"cmd_id": "v", "type": "facts.verify", "args": {"id": 2, "resolution": "checked: it is Phobos"}}
    reject = {"cmd_id": "r", "type": "facts.reject", "args": {"id": 3}}
    fake = FakeLLM(
        "fake", responses=[OUTPUT, "Checking.\n# Commands:\n" + json.dumps([verify, reject]) + "\n# End commands"]
    )
    agent = agent_factory(fake)
    state = agent.tick()
    assert state["confidence"] == 0.75 and "UnverifiedFacts" not in state["thought"]
    with agent.services.db.unit() as repos:
        row = repos.session.get(Message, state["response_id"])
        assert row.confidence == 0.75 and len(row.unverified_facts_json) == 4
        facts = repos.facts.of_message(row.id)
        assert [(f.status, f.task_id is not None) for f in facts] == [
            ("open", False),
            ("pending", True),
            ("pending", True),
            ("pending", True),
        ]
        own, shared = repos.tasks.get(facts[1].task_id), repos.tasks.get(facts[2].task_id)
        assert own.kind == shared.kind == "fact-check" and own.id != shared.id and facts[3].task_id == shared.id
        assert (
            own.title == "fact-check: Tides on Mars are caused by Phobos"
            and "Bay of Fundy (0.60)" in shared.description
        )
    agent.tick()
    with agent.services.db.unit() as repos:
        facts = {f.id: f for f in repos.facts.list(limit=10)}
        assert facts[2].status == "verified" and facts[2].resolution == "checked: it is Phobos"
        assert facts[3].status == "rejected" and repos.tasks.get(facts[2].task_id).status == "done"
        assert repos.tasks.get(facts[3].task_id).status == "open"  # fact 4 shares it and is still pending
        assert len(repos.facts.of_message(state["response_id"])) == 4  # not registered twice


def test_the_threshold_is_configurable(agent_factory):
    agent = agent_factory(FakeLLM("fake", responses=["[confidence=0.8]Seals sleep in water[/confidence]."]))
    agent.services.settings.reflexes.factcheck_threshold = 0.9
    agent.tick()
    with agent.services.db.unit() as repos:
        assert [(f.claim, f.status) for f in repos.facts.list()] == [("Seals sleep in water", "pending")]
