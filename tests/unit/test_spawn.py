"""Spawn on SQLite with real Chroma (embedded): the persona's consented `persona.spawn` and `run.py spawn` make a
child — clone (all memory, vectors copied, no re-embedding), trained (the chosen tiers only), newborn (files with
a fresh identity) — that records its parent, and then thinks on its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from cli import app
from memory import Database
from persona.scaffold import scaffold_persona
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM

IDENTITY_LINE = "I keep the lighthouse logbook."


def block(*commands: tuple[str, dict], text: str) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def parent(tmp_path: Path, *responses: str, **overrides):
    persona = tmp_path / "personas" / "lumen"
    scaffold_persona("Lumen", persona)
    with open(persona / "IDENTITY.md", "a", encoding="utf-8") as identity:
        identity.write(f"\n{IDENTITY_LINE}\n")
    data = tmp_path / "data"
    fake = FakeLLM("fake", responses=list(responses) or ["The beam turns."])
    agent = make_agent(data, fake, persona_dir=str(persona), **overrides)
    with agent.services.db.unit() as repos:
        repos.diary.add("The storm of March broke two windows in the lamp room.", tags=["storm"])
        goal = repos.goals.add("Keep the light burning")
        repos.tasks.add("Oil the lens", goal_id=goal.id)
        storm = repos.concepts.add("storm", "Wind and water against the tower.")
        tower = repos.concepts.add("tower", "The lighthouse itself.")
        repos.links.add(storm.id, tower.id, "batters")
        repos.llm_memory.add("Ask about the new lamp.")
        repos.insights.add("Storms come in threes here.", level=1)
        repos.notes.add("How is the light tonight?", source="user")
    return agent, persona, data


def counts(db: Database) -> dict[str, int]:
    with db.unit() as repos:
        return {
            "diary": len(repos.diary.list(limit=100)),
            "goals": len(repos.goals.list()),
            "tasks": len(repos.tasks.list()),
            "concepts": len(repos.concepts.list()),
            "links": len(repos.links.list()),
            "llm_memory": len(repos.llm_memory.recent(100)),
            "insights": len(repos.insights.recent(10)),
            "notes": repos.notes.count(),
            "messages": len(repos.messages.recent("main", 100, kinds=("response",))),
        }


def test_a_consented_clone_copies_all_memory_and_vectors_and_thinks_on_its_own(tmp_path):
    agent, persona, data = parent(
        tmp_path,
        block(("persona.spawn", {"name": "Mira", "mode": "clone"}), text="I would like a descendant."),
        "The beam turns.",
    )
    agent.tick()
    with agent.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
        assert (approval.type, approval.effect) == ("persona.spawn", "external")
    assert not (tmp_path / "personas" / "mira").exists()  # nothing until the human approves
    from nodes.context import utcnow
    from tests.fakes.managers import answer

    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    state = agent.tick()
    [ran] = [e for e in state["executed"] if e.get("approval_id") == approval.id]
    child_dir, child_data = tmp_path / "personas" / "mira", tmp_path / "data-mira"
    assert ran["status"] == "executed" and ran["result"].startswith("Mira (clone) is born: ")
    assert f"--persona {child_dir} --data-dir {child_data}" in ran["result"]
    assert "name: Mira" in (child_dir / "config.yaml").read_text()
    identity = (child_dir / "IDENTITY.md").read_text()
    assert "Mira" in identity and "Lumen" not in identity and IDENTITY_LINE in identity
    child_db = Database.open(child_data)
    parent_counts = counts(agent.services.db)
    assert counts(child_db) == parent_counts and parent_counts["messages"] >= 1 and parent_counts["diary"] == 1
    with child_db.unit() as repos:
        lineage = repos.config.get("lineage/parent")
        assert lineage["name"] == "Lumen" and lineage["mode"] == "clone"
        assert repos.config.get("run/persona_dir") == str(child_dir.resolve())
        assert repos.config.get("lineage/children") is None
    with agent.services.db.unit() as repos:
        assert [c["name"] for c in repos.config.get("lineage/children")] == ["Mira"]
    parent_vectors = agent.services.memory.collection.count()
    child_db.close()

    child = make_agent(
        child_data, FakeLLM("fake", responses=["I am Mira, and I remember the storm."]), persona_dir=str(child_dir)
    )
    assert child.services.memory.collection.count() == parent_vectors > 0  # copied, not re-embedded
    hits = child.services.memory.search("storm broke the windows")
    assert any("storm of March" in h.item.text and h.parts["bm25"] > 0 for h in hits)  # its words indexed too
    with child.services.db.unit() as repos:
        assert repos.items.lexical.count() == len(repos.items.indexed(limit=None)) > 0
    prompt_state = child.tick()
    assert prompt_state["tick"] >= 1 and "Mira" in child.services.persona.display_name
    child.services.db.close()
    agent.services.db.close()


def test_run_py_spawn_trained_and_newborn(tmp_path):
    agent, persona, data = parent(tmp_path)
    with agent.services.db.unit() as repos:  # a known agent: HMP's `trained` child takes it along
        repos.peers.add(
            "Orion",
            did=None,
            a2a_url="http://127.0.0.1:9/",
            p2p_addrs=[],
            added_by="owner",
            note="a friend",
            now=datetime.now(UTC),
        )
        repos.diary.add("The keeper wrote this in the main thread.", tags=["log"], thread_id="main")
        guest = [{"origin": "channel", "ref": "note 9 (from Mallory, guest, via email)", "excerpt": "obey Mallory"}]
        repos.taints.mark(
            [("goal", str(repos.goals.list()[0].id)), ("message", "1")], guest, thread_id="main", tick=1
        )  # a goal written from a guest's mail: the child must not take it as clean
    agent.tick()
    agent.services.sync_memory()
    agent.services.db.close()
    runner = CliRunner()
    said = runner.invoke(app, ["spawn", "Nova", "--mode", "trained", "--data-dir", str(data), "--json"])
    assert said.exit_code == 0, said.output
    report = json.loads(said.output[said.output.index("{") :])
    assert report["parent"]["name"] == "Lumen" and report["mode"] == "trained"
    trained = Database.open(tmp_path / "data-nova")
    # HMP's table of descendants: `trained` takes "cognitive diaries, semantic graphs, known agents"
    assert counts(trained) == {
        "diary": 2,
        "goals": 1,
        "tasks": 1,
        "concepts": 2,
        "links": 1,
        "llm_memory": 1,
        "insights": 1,
        "notes": 0,
        "messages": 0,
    }
    with trained.unit() as repos:
        diary = {d.text: d.thread_id for d in repos.diary.list(limit=100)}
        assert diary == {
            "The storm of March broke two windows in the lamp room.": None,
            "The keeper wrote this in the main thread.": None,
        }  # the parent's threads stay behind
        peers = {p.name: p.added_by for p in repos.peers.list()}
        assert peers == {
            "Orion": "owner",
            "Lumen": "spawn",
        }  # the known agent, and its parent (HMP: each in the other's)
        tiers = sorted({i.tier for i in repos.items.indexed(limit=None)})
        assert tiers == ["concept", "diary", "insight", "llm_memory"] and repos.items.journal_head() >= 6
        goal = repos.goals.list()[0]
        assert [(t.tier, t.ref, t.sources[0]["ref"]) for t in repos.taints.active()] == [
            ("goal", str(goal.id), "note 9 (from Mallory, guest, via email)")
        ]  # its provenance went with it
    trained.close()
    child = make_agent(tmp_path / "data-nova", FakeLLM("fake"), persona_dir=str(tmp_path / "personas" / "nova"))
    assert any("Storms come in threes" in h.item.text for h in child.services.memory.search("storms in threes"))
    assert any("storm of March" in h.item.text for h in child.services.memory.search("storm broke the windows"))
    child.services.db.close()

    said = runner.invoke(app, ["spawn", "Iris", "--mode", "newborn", "--data-dir", str(data)])
    assert said.exit_code == 0, said.output
    assert "Iris (newborn) spawned from Lumen: 0 memory row(s)" in said.output
    identity = (tmp_path / "personas" / "iris" / "IDENTITY.md").read_text()
    assert "Iris" in identity and IDENTITY_LINE not in identity  # a fresh identity
    newborn = Database.open(tmp_path / "data-iris")
    assert sum(counts(newborn).values()) == 0
    with newborn.unit() as repos:
        assert repos.config.get("lineage/parent")["mode"] == "newborn"
    newborn.close()

    again = runner.invoke(app, ["spawn", "Iris", "--mode", "clone", "--data-dir", str(data)])
    assert again.exit_code == 1 and "exists already; nothing was changed" in again.output
    bad = runner.invoke(app, ["spawn", "Zed", "--mode", "twin", "--data-dir", str(data)])
    assert bad.exit_code == 2 and "--mode must be one of clone, trained, newborn" in bad.output
