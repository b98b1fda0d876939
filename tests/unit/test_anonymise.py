"""Anonymisation on the human's request (HMP long-term memory): names and places in every memory tier and in the
memory history become placeholders, found offline; the persona's request waits for the human's approval; the
mapping is encrypted in an owner-only file that no command, prompt or export reads; only the owner's key undoes it."""

from __future__ import annotations

import json
import stat

from cryptography.fernet import Fernet
from sqlalchemy import select
from typer.testing import CliRunner

from managers import ManagerDeps, Managers
from memory.models import MemoryChange, MemoryItem
from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

DIARY = "Had tea with Alice Moreau in Lisbon; Alice laughed at the gulls."
NOTE = "Call Alice on Sunday about the ferry."


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "My human asked me to forget who is who.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def seeded(agent) -> None:
    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    with agent.services.db.unit() as repos:
        entry = repos.diary.add("Had tea with Alice in town.")
        repos.entities.merge("Alice Moreau", kind="person", description="my human's sister; she lives in Lisbon")
        repos.entities.merge("Lisbon", kind="place", description="a city by the sea")
        repos.llm_memory.add(NOTE, title="Sunday")
        entry_id = entry.id
    with agent.services.db.unit(actor="human") as repos:  # an edit: the history keeps the text before it
        Managers(repos, deps).memory.edit("diary", str(entry_id), {"text": DIARY})


def memory_text(agent) -> str:
    """Everything the memory tiers, their search catalogue and their history hold, as one text."""
    with agent.services.db.unit() as repos:
        texts = [e.text for e in repos.diary.list(limit=50)]
        texts += [f"{e.name} {e.description} {e.aliases}" for e in repos.entities.all()]
        texts += [f"{m.title} {m.content}" for m in repos.llm_memory.recent_lines(50)]
        texts += [f"{i.title} {i.text}" for i in repos.session.scalars(select(MemoryItem)).all()]
        texts += [json.dumps([c.before, c.after]) for c in repos.session.scalars(select(MemoryChange)).all()]
    return "\n".join(texts)


def test_the_persona_asks_the_human_approves_and_only_the_owners_key_undoes_it(agent_factory, tmp_path):
    fake = FakeLLM("fake", responses=[block(("memory.anonymise", {})), "Waiting.", "Done."])
    agent = agent_factory(fake)
    seeded(agent)
    assert "Alice" in memory_text(agent) and "Lisbon" in memory_text(agent)
    first = agent.tick()
    assert first["executed"][0]["status"] == "pending_approval"
    assert "Alice Moreau" in memory_text(agent)  # nothing changed on the persona's word
    with agent.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
        assert (approval.type, approval.effect, approval.args) == ("memory.anonymise", "modify_self", {})
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    second = agent.tick()
    [ran] = [e for e in second["executed"] if e.get("approval_id") == approval.id]
    assert ran["status"] == "executed" and "Alice" not in ran["result"] and "Lisbon" not in ran["result"]
    assert "[PERSON_1]" in ran["result"] and "[PLACE_1]" in ran["result"]
    text = memory_text(agent)
    assert "Alice" not in text and "Lisbon" not in text and "Moreau" not in text  # tiers, catalogue, history
    with agent.services.db.unit() as repos:
        [diary] = [e.text for e in repos.diary.list(limit=5) if "tea" in e.text]
        assert diary == "Had tea with [PERSON_1] in [PLACE_1]; [PERSON_2] laughed at the gulls."
        assert sorted(e.name for e in repos.entities.all()) == ["[PERSON_1]", "[PLACE_1]"]
        assert repos.llm_memory.recent_lines(5)[0].content == "Call [PERSON_2] on Sunday about the ferry."
    agent.tick()  # the next prompt holds no name either
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "Lisbon" not in prompt and "[PLACE_1]" in prompt
    # the mapping: encrypted, owner-only, outside the database and the persona's archive
    secrets = tmp_path / "secrets"
    key, [saved] = secrets / "anonymisation.key", list((secrets / "anonymisation").glob("*.enc"))
    for path in (key, saved):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert b"Alice" not in saved.read_bytes()
    assert json.loads(Fernet(key.read_bytes()).decrypt(saved.read_bytes())) == {
        "[PERSON_1]": "Alice Moreau",
        "[PERSON_2]": "Alice",
        "[PERSON_3]": "Moreau",
        "[PLACE_1]": "Lisbon",
    }
    # the persona has no way back: no command restores, and a wrong key opens nothing
    from nodes.commands import registry

    assert [t for t in registry().specs if "anonymi" in t] == ["memory.anonymise"]
    from cli import app

    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(Fernet.generate_key())
    refused = CliRunner().invoke(app, ["memory", "deanonymise", "--data-dir", str(tmp_path), "--key-file", str(wrong)])
    assert refused.exit_code == 1 and "does not open" in refused.output
    assert "Alice" not in memory_text(agent)
    # the owner's key: everything back, the history too
    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    with agent.services.db.unit(actor="human") as repos:
        restored = Managers(repos, deps).anonymise.restore()
    from managers.anonymise import AnonymisationManager

    AnonymisationManager.forget(restored.consumed)  # after the commit
    with agent.services.db.unit() as repos:
        assert DIARY in [e.text for e in repos.diary.list(limit=5)]
        assert sorted(e.name for e in repos.entities.all()) == ["Alice Moreau", "Lisbon"]
    assert "[PERSON_" not in memory_text(agent) and not list((secrets / "anonymisation").glob("*.enc"))


def test_the_humans_dry_run_lists_names_and_places_and_changes_nothing(agent_factory, tmp_path):
    from cli import app

    agent = agent_factory(FakeLLM("fake"))
    seeded(agent)
    result = CliRunner().invoke(
        app,
        ["memory", "anonymise", "--data-dir", str(tmp_path), "--dry-run", "--name", "the ferry", "--keep", "Sunday"],
    )
    assert result.exit_code == 0, result.output
    assert "[PERSON_1] ← Alice Moreau" in result.output and "[PLACE_1] ← Lisbon" in result.output
    assert "← the ferry" in result.output and "Sunday" not in result.output and "Call" not in result.output
    assert "nothing changed" in result.output and "Alice Moreau" in memory_text(agent)
    bad = CliRunner().invoke(app, ["memory", "anonymise", "--data-dir", str(tmp_path), "--tier", "nonsense"])
    assert bad.exit_code == 2 and "tiers: no memory tier 'nonsense'" in bad.output
