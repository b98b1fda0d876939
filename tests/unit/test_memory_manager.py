"""The memory manager: novelty archiving, LRU, emotion-weighted retention, modes, logging and restore.

SQLite + a real Chroma PersistentClient with the deterministic HashEmbedder (texts sharing words are similar).
"""

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from memory.models import ProcessLog
from memory.retrieval.index import Query
from memory.store import record_turn
from memory.upkeep.manager import ManagerSettings, run_pass, set_memory_status
from tests.fakes.llm import FakeLLM

THOUGHT = "The lighthouse keeper rows out at dawn to check the nets and the buoys"


def thought(repos, n: int, text: str, **kwargs):
    return record_turn(repos, ref=f"msg:{n}", text=text, author="Lumen", episode="main", thread_id="main", **kwargs)


def fill(index, *, grace_filler: int = 0):
    """Three copies of one thought, one said by the human, one distinct thought, one trivial one."""
    with index.db.unit() as repos:
        thought(repos, 1, THOUGHT)
        record_turn(repos, ref="note:1", text=THOUGHT, author="User", episode="main", thread_id="main")
        thought(repos, 2, THOUGHT + " again")
        thought(repos, 3, THOUGHT + " and the boats at sea", emotion_score=1.0)  # close, but it moved me
        thought(repos, 4, "Bread rises slowly in a cold kitchen with rosemary and salt")
        thought(repos, 5, "Yes.")
        for i in range(grace_filler):
            thought(repos, 100 + i, f"filler thought number {i} about apples orchards cider presses harvest")
    index.sync()


def decisions(db):
    with db.session() as s:
        return [
            r.value
            for r in s.scalars(
                select(ProcessLog).where(ProcessLog.name == "memory.upkeep.manager").order_by(ProcessLog.id)
            ).all()
        ]


def statuses(db):
    with db.unit() as repos:
        return {
            ref: repos.items.find("message", ref).status
            for ref in ("msg:1", "note:1", "msg:2", "msg:3", "msg:4", "msg:5")
        }


def test_novelty_archives_copies_and_trivia_keeps_emotional_and_human_words(index):
    fill(index)
    with index.db.unit() as repos:
        report = run_pass(repos, index, ManagerSettings(grace_items=0))
    assert report.assessed == 5  # the persona's own turns only: the human's note is never a candidate
    assert statuses(index.db) == {
        "msg:1": "active",
        "note:1": "active",
        "msg:2": "archived",
        "msg:3": "active",
        "msg:4": "active",
        "msg:5": "archived",
    }
    log = decisions(index.db)
    assert any(line.startswith("archived message msg:2 (novelty)") and "closest: message" in line for line in log)
    assert any(line.startswith("archived message msg:5 (novelty)") and "information 0.33" in line for line in log)
    assert any(
        line.startswith("kept message msg:3 (novelty)") and "emotion 1.00 lowers its bar" in line for line in log
    )
    assert log[-1].startswith(
        "assessed 5; archived 2 (2 by novelty); kept 1 by emotion or goal; restore with memory.restore"
    )
    index.sync()
    assert "msg:2" not in [h.item.ref for h in index.search(Query(text="lighthouse keeper nets", k=10))]
    # a second pass decides nothing again (the kept one is logged once)
    with index.db.unit() as repos:
        again = run_pass(repos, index, ManagerSettings(grace_items=0))
    assert again.assessed == 0 and again.decisions == []


def test_archived_memory_is_restored_by_command_and_searchable_again(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            'Back.\n# Commands:\n[{"cmd_id": "r", "type": "memory.restore", '
            '"args": {"tier": "message", "ref": "msg:2"}}]\n# End commands',
            'List.\n# Commands:\n[{"cmd_id": "l", "type": "memory.archived", "args": {}}]\n# End commands',
        ],
    )
    agent = agent_factory(fake)
    fill(agent.services.memory)
    with agent.services.db.unit() as repos:
        run_pass(repos, agent.services.memory, ManagerSettings(grace_items=0))
        assert {i.ref for i in repos.items.archived()} == {"msg:2", "msg:5"}
    agent.tick()
    assert statuses(agent.services.db)["msg:2"] == "active"
    agent.tick()
    with agent.services.db.unit() as repos:
        listing = [c for c in repos.commands.recent(5) if c.type == "memory.archived"][0]
        restored = [
            p.value for p in repos.session.scalars(select(ProcessLog).where(ProcessLog.name == "memory.restore"))
        ]
    assert "message msg:5" in listing.result and "msg:2" not in listing.result
    assert restored == ["message msg:2 restored on request"]
    hits = agent.services.memory.search(Query(text="lighthouse keeper nets again", k=10))
    assert "msg:2" in [h.item.ref for h in hits]


def test_grace_keeps_the_newest_memories_out_of_reach(index):
    fill(index)
    with index.db.unit() as repos:
        report = run_pass(repos, index, ManagerSettings(grace_items=4))
    assert report.assessed == 1 and report.archived == []  # only msg:1 is old enough; it has nothing older like it


def test_lru_archives_least_recently_used_beyond_the_limit_with_emotion_retention(index):
    now = datetime.now(UTC)
    with index.db.unit() as repos:
        entries = [repos.diary.add(f"Diary entry {i} about topic{i} and subject{i} and matter{i}") for i in range(6)]
        repos.diary.add("A day I will not forget: the storm topic0", emotions=["fear:5"])
        for n, entry in enumerate(entries):
            item = repos.items.find("diary", entry.id)
            item.created_at = item.updated_at = now - timedelta(days=30 - n)  # entry 0 is the oldest
        feeling = repos.items.find("diary", 7)
        feeling.created_at = feeling.updated_at = now - timedelta(days=40)  # the oldest of all, but emotional
        repos.items.touch([repos.items.find("diary", entries[0].id).id], now)  # entry 0 was just recalled
    with index.db.unit() as repos:
        report = run_pass(repos, index, ManagerSettings(lru_limit=4, grace_items=100))
    with index.db.unit() as repos:
        archived = {int(i.ref) for i in repos.items.archived(limit=10)}
        diary_status = {e.id: e.status for e in repos.diary.list(limit=10, include_archived=True)}
    assert archived == {entries[1].id, entries[2].id, entries[3].id}  # 7 active, limit 4: the three least recently used
    assert diary_status[7] == "active" and diary_status[entries[0].id] == "active"
    assert all(diary_status[i] == "archived" for i in archived)  # the diary's own status follows
    assert [d.policy for d in report.archived] == ["lru"] * 3
    assert "7 active diary entries > limit 4" in decisions(index.db)[0]


def test_llm_memory_is_searchable_and_its_lru_hides_it_from_the_prompt(index):
    with index.db.unit() as repos:
        ids = [repos.llm_memory.add(f"plan {i}: learn about tides{i} moons{i} currents{i}").id for i in range(3)]
    index.sync()
    assert index.search(Query(text="plan learn tides1 moons1", k=1))[0].item.ref == str(ids[1])
    with index.db.unit() as repos:
        run_pass(repos, index, ManagerSettings(lru_limit=2, grace_items=100, lru_tiers=["llm_memory"]))
    with index.db.unit() as repos:
        assert [m.id for m in repos.llm_memory.recent()] == ids[1:]
        assert repos.llm_memory.get(ids[0]).status == "archived"
        set_memory_status(repos, "llm_memory", ids[0], "active")
    with index.db.unit() as repos:
        assert [m.id for m in repos.llm_memory.recent()] == ids


def test_modes_shape_the_parameters_and_the_outcome(index):
    standard = ManagerSettings()
    assert standard.effective().goal_focus == 0.0  # goals only matter in concentration
    aggressive = ManagerSettings(mode="aggressive_pruning").effective()
    lenient = ManagerSettings(mode="lenient_pruning").effective()
    meditation = ManagerSettings(mode="meditation").effective()
    assert aggressive.novelty_threshold == pytest.approx(0.525) and aggressive.lru_limit == 250
    assert lenient.novelty_threshold == pytest.approx(0.175) and lenient.lru_limit == 1000
    assert meditation.novelty_threshold == pytest.approx(0.35 * 1.4) and meditation.goal_focus == 0.0
    assert ManagerSettings(mode="concentration").effective().goal_focus == 0.7
    fill(index)
    with index.db.unit() as repos:  # lenient: the emotional copy and the distinct thought stay, as in standard
        run_pass(repos, index, ManagerSettings(mode="lenient_pruning", grace_items=0, emotion_weight=1.0))
    assert statuses(index.db)["msg:3"] == "active"


def test_concentration_keeps_goal_related_memories(index):
    with index.db.unit() as repos:
        repos.goals.add("Repair the lighthouse lamp", description="nets buoys keeper")
    fill(index)
    with index.db.unit() as repos:
        run_pass(repos, index, ManagerSettings(mode="concentration", grace_items=0, goal_focus=1.0))
    assert statuses(index.db)["msg:2"] == "active"  # a copy, but about the goal
    assert any("goal-related lowers its bar" in line for line in decisions(index.db))


def test_settings_are_validated_when_given():
    with pytest.raises(ValidationError, match="'standard', 'concentration', 'meditation'"):
        ManagerSettings(mode="sleepy")
    for bad in (
        {"novelty_threshold": 1.5},
        {"lru_limit": 0},
        {"lru_limit": 2_000_000},
        {"emotion_weight": -0.1},
        {"every": -1},
        {"similarity_floor": float("nan")},
        {"max_per_pass": 0},
        {"lru_tiers": ["kb"]},
        {"sleepy": True},
    ):
        with pytest.raises(ValidationError):
            ManagerSettings(**bad)
    settings = ManagerSettings(lru_tiers=["diary"])
    with pytest.raises(ValidationError):
        settings.goal_focus = 2.0  # an assignment is checked too
    assert ManagerSettings(mode="lenient_pruning", lru_limit=1_000_000).effective().lru_limit == 2_000_000


def test_the_tick_runs_the_manager_on_its_schedule_from_config(agent_factory):
    repeat = "The tide comes in and the tide goes out over the grey sand of the bay"
    agent = agent_factory(
        FakeLLM("fake", responses=[repeat, repeat + " again", repeat + " still", "Yes."] * 3),
        memory_manager={"every": 3, "grace_items": 0},
    )
    reports = [agent.tick().get("memory_upkeep", {}).get("manager") for _ in range(3)]
    assert reports[:2] == [None, None] and reports[2]["assessed"] == 3 and reports[2]["archived"] >= 1
    with agent.services.db.unit() as repos:
        summary = [p.value for p in repos.processes.open("main") if p.name == "memory.upkeep.manager"]
        repos.config.set("persona/memory_manager.lru_limit", 7)  # the persona's own change wins over config.yaml…
        repos.config.set("persona/memory_manager.every", 0)  # …for the keys it may change; this one is the operator's
    assert (
        summary and summary[0].startswith("assessed 3; archived") and "[mode standard: novelty bar 0.35" in summary[0]
    )
    assert [agent.tick().get("memory_upkeep", {}).get("manager") is None for _ in range(3)] == [True, True, False]
    assert agent.services.settings.memory_manager.lru_limit == 7 and agent.services.settings.memory_manager.every == 3


def test_concepts_come_back_when_used(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            'Read.\n# Commands:\n[{"cmd_id": "c", "type": "concepts.read", "args": {"name": "tide"}}]\n# End commands'
        ],
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        concept = repos.concepts.add("tide", "the sea rising and falling")
        set_memory_status(repos, "concept", concept.id, "archived")
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.concepts.get(concept.id).status == "active"
        assert repos.items.find("concept", concept.id).status == "active"
        assert repos.items.find("concept", concept.id).access_count == 1
