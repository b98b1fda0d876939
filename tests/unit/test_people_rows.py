"""People (HMP `users`, `users_group`): groups of people through the persona's commands (after the owner's approval),
the API and the command line; forgetting a person — their words deleted for good, their name a placeholder
everywhere else, the owner's act on the page/API/CLI or the persona's after approval; and the rights that differ
between trusted people and guests (managers/people.py RIGHTS): whose note comes first, and whether their words may
make the persona reach outside or change itself without the owner."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from sqlalchemy import select, text
from typer.testing import CliRunner

from managers import ManagerDeps, Managers
from managers.channels import Arrival
from memory.models import AuditEntry, MemoryItem, Note
from memory.store import record_turn
from nodes.context import utcnow
from persona.settings import ChannelEntry
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

ENTRY = ChannelEntry(kind="matrix", name="matrix", rate_per_minute=30, max_message_chars=2000)
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def commands(*items: tuple[str, dict]) -> str:
    listed = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(items, 1)]
    return "I tend to the people I know.\n# Commands:\n" + json.dumps(listed) + "\n# End commands"


def approve_all(agent) -> list[int]:
    with agent.services.db.unit() as repos:
        ids = [a.id for a in repos.approvals.pending()]
    for approval_id in ids:
        answer(agent.services.db, approval_id, approve=True, by="human", now=utcnow())
    return ids


def house(agent, repos) -> Managers:
    return Managers(repos, ManagerDeps(settings=agent.services.settings, clock=agent.services.clock))


def arrive(agent, sender: str, text_: str, pid: str) -> int:
    with agent.services.db.unit() as repos:
        got = house(agent, repos).channels.receive(
            Arrival(
                channel="matrix",
                platform_id=pid,
                sender=sender,
                sender_name=sender,
                conversation="!room:hs",
                text=text_,
                sent_at=NOW,
            ),
            ENTRY,
            now=NOW,
        )
    assert got.state == "noted"
    return int(got.note_id)


def test_the_persona_groups_people_after_the_owners_approval(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            commands(
                ("users.group_add", {"group": "family", "description": "my human's kin"}),
                ("users.join", {"person": "Annika Brauer", "group": "family"}),
            ),
            "Waiting for my human.",
            commands(("users.groups", {}), ("users.leave", {"person": "Annika Brauer", "group": "family"})),
            "Done.",
        ],
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        house(agent, repos).people.add("Annika Brauer", role="trusted")
    first = agent.tick()
    assert [e["status"] for e in first["executed"]] == ["pending_approval", "pending_approval"]
    assert len(approve_all(agent)) == 2
    second = agent.tick()
    assert sorted(e["type"] for e in second["executed"] if e["status"] == "executed") == [
        "users.group_add",
        "users.join",
    ]
    with agent.services.db.unit() as repos:
        [(group, members)] = house(agent, repos).people.groups()
        assert (group.name, group.description, [p.name for p in members]) == (
            "family",
            "my human's kin",
            ["Annika Brauer"],
        )
        people = house(agent, repos).people
        assert people.view(people.get(members[0].id)).groups == ("family",)
    third = agent.tick()  # users.groups reads at once; users.leave waits
    [listed] = [e for e in third["executed"] if e["type"] == "users.groups"]
    assert listed["status"] == "executed" and "family: Annika Brauer" in listed["result"]
    approve_all(agent)
    fourth = agent.tick()
    assert [e["status"] for e in fourth["executed"] if e["type"] == "users.leave"] == ["executed"]
    with agent.services.db.unit() as repos:
        assert [(g.name, m) for g, m in house(agent, repos).people.groups()] == [("family", [])]


def test_groups_on_the_api_and_the_command_line(web, tmp_path):
    client, csrf = web.client, web.csrf
    person = client.post("/api/people", json={"name": "Annika Brauer", "role": "guest"}, headers=csrf).json()
    assert (
        client.post("/api/groups", json={"name": "neighbours", "description": "next door"}, headers=csrf).status_code
        == 201
    )
    assert client.post("/api/groups", json={"name": "neighbours"}, headers=csrf).status_code == 409
    joined = client.put(f"/api/groups/neighbours/members/{person['id']}", headers=csrf)
    assert joined.status_code == 200 and joined.json() == [
        {"name": "neighbours", "description": "next door", "members": ["Annika Brauer"]}
    ]
    assert client.get(f"/api/people/{person['id']}").json()["groups"] == ["neighbours"]
    assert client.put("/api/groups/nobody/members/1", headers=csrf).status_code == 404
    from cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["users", "group-add", "choir", "--data-dir", str(tmp_path)]).exit_code == 0
    assert runner.invoke(app, ["users", "join", "Annika Brauer", "choir", "--data-dir", str(tmp_path)]).exit_code == 0
    listed = runner.invoke(app, ["users", "groups", "--data-dir", str(tmp_path)])
    assert "choir: Annika Brauer" in listed.output and "neighbours: Annika Brauer" in listed.output
    assert runner.invoke(app, ["users", "group-delete", "choir", "--data-dir", str(tmp_path)]).exit_code == 0
    assert [g["name"] for g in client.get("/api/groups").json()] == ["neighbours"]


def _known_guest_who_talked(agent) -> tuple[int, list[int]]:
    """Annika (a guest on Matrix) wrote twice; her words became conversation memories; the owner spoke of her."""
    with agent.services.db.unit() as repos:
        annika = house(agent, repos).people.add("Annika Brauer", role="guest")
        house(agent, repos).people.add_identity(annika.id, "matrix", "@annika:hs")
        house(agent, repos).people.add_group("neighbours")
        house(agent, repos).people.join(annika.id, "neighbours")
        annika_id = annika.id
    notes = [
        arrive(agent, "@annika:hs", "My secret recipe: figs in honey.", "$1"),
        arrive(agent, "@annika:hs", "And a pinch of salt.", "$2"),
    ]
    with agent.services.db.unit() as repos:
        for n in notes:
            record_turn(
                repos,
                ref=f"note:{n}",
                text=repos.notes.get(n).text,
                author="Annika Brauer",
                episode="main",
                thread_id="main",
            )
        owner_note = repos.notes.add("Annika Brauer brought figs; thank her.", source="user")
        record_turn(
            repos, ref=f"note:{owner_note.id}", text=owner_note.text, author="User", episode="main", thread_id="main"
        )
    agent.services.memory.sync(flush=True)
    return annika_id, notes


def _forgotten(agent, annika_id: int, notes: list[int]) -> None:
    db = agent.services.db
    with db.unit() as repos:
        assert repos.people.get(annika_id) is None and repos.people.identity("matrix", "@annika:hs") is None
        assert repos.notes.many(notes) == [] and repos.people.groups_of([annika_id]) == {annika_id: []}
        gone = repos.session.scalars(select(MemoryItem).where(MemoryItem.ref.in_([f"note:{n}" for n in notes]))).all()
        assert gone and all((i.status, i.text) == ("deleted", "") for i in gone)
        texts = [n.text for n in repos.session.scalars(select(Note)).all()]
        assert "[PERSON_1] brought figs; thank her." in texts  # what the owner said of her: her name anonymised
        items = " ".join(
            f"{i.text} {i.context_before} {i.context_after}" for i in repos.session.scalars(select(MemoryItem))
        )
        assert "figs in honey" not in items and "Annika" not in items
    with db.engine.connect() as conn:  # neither her words nor her name in the full-text index
        assert (
            conn.execute(
                text("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'honey OR annika OR brauer'")
            ).scalar()
            == 0
        )
    hits = agent.services.memory.search("figs in honey with a pinch of salt")
    assert all("honey" not in h.item.text for h in hits)


def test_the_owner_forgets_a_person_on_the_api(web):
    annika_id, notes = _known_guest_who_talked(web.agent)
    response = web.client.delete(f"/api/people/{annika_id}", headers=web.csrf)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["name"], body["notes"], body["memories"]) == ("Annika Brauer", 2, 2)
    assert body["placeholders"] == ["[PERSON_1]", "[PERSON_2]", "[PERSON_3]"]  # her name, and each of its words
    assert body["directory"]["identities"] == 1 and body["directory"]["groups"] == 1
    _forgotten(web.agent, annika_id, notes)
    owner = web.client.get("/api/people").json()["people"][0]
    refused = web.client.delete(f"/api/people/{owner['id']}", headers=web.csrf)
    assert refused.status_code == 409 and "last owner" in refused.text
    assert web.client.delete("/api/people/999", headers=web.csrf).status_code == 404
    with web.agent.services.db.unit() as repos:  # the owner's act is audited as theirs
        [entry] = repos.session.scalars(select(AuditEntry).where(AuditEntry.type == "users.delete")).all()
        assert (entry.actor, entry.decision) == ("human", "executed")


def test_the_people_page_forgets_a_person(web):
    annika_id, notes = _known_guest_who_talked(web.agent)
    page = web.client.get("/people")
    assert f'data-testid="forget-{annika_id}"' in page.text
    done = web.client.post(f"/people/{annika_id}/delete", headers=web.csrf)
    assert done.status_code == 200 and "Annika" not in done.text
    _forgotten(web.agent, annika_id, notes)


def test_the_command_line_forgets_a_person(agent_factory, tmp_path):
    agent = agent_factory(FakeLLM("fake"))
    annika_id, notes = _known_guest_who_talked(agent)
    from cli import app

    result = CliRunner().invoke(app, ["users", "delete", "Annika Brauer", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "forgotten: Annika Brauer — 2 note(s) and 2 conversation memories deleted" in result.output
    _forgotten(agent, annika_id, notes)


def test_the_persona_forgets_a_person_only_with_the_owners_approval_and_never_an_owner(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            commands(("users.delete", {"person": "Annika Brauer"}), ("users.delete", {"person": "owner"})),
            "Waiting.",
            "Done.",
        ],
    )
    agent = agent_factory(fake)
    annika_id, notes = _known_guest_who_talked(agent)
    first = agent.tick()
    assert [e["status"] for e in first["executed"]] == ["pending_approval", "pending_approval"]
    with agent.services.db.unit() as repos:
        assert repos.people.get(annika_id) is not None  # nothing on the persona's word
    approve_all(agent)
    second = agent.tick()
    ran = {e["result"][:40]: e["status"] for e in second["executed"] if e.get("approval_id")}
    assert sorted(ran.values()) == ["executed", "failed"]
    assert any("only the operator deletes an owner" in e["result"] for e in second["executed"])
    [forgot] = [e for e in second["executed"] if e.get("approval_id") and e["status"] == "executed"]
    assert "Annika" not in forgot["result"] and "[PERSON_1]" in forgot["result"]
    _forgotten(agent, annika_id, notes)
    assert "Annika" not in json.dumps(agent.state())  # the loop finished it in the checkpoint too


def test_a_trusted_persons_note_comes_first_and_may_lead_to_what_a_guests_words_may_not(agent_factory):
    search = commands(("search.web", {"query": "figs in honey"}))
    fake = FakeLLM("fake", responses=[search, search])
    searcher = [sys.executable, "-c", "import sys; print('figs keep in honey for a year:', sys.argv[1])", "{query}"]
    agent = agent_factory(
        fake, consent={"auto_approve": ["search.web"]}, search={"backend": "command", "command": searcher}
    )
    with agent.services.db.unit() as repos:
        people = house(agent, repos).people
        people.add_identity(people.add("Tomas", role="trusted").id, "matrix", "@tomas:hs")
        people.add_identity(people.add("Greta", role="guest").id, "matrix", "@greta:hs")
    trusted_note = arrive(agent, "@tomas:hs", "Could you look up figs in honey?", "$t")
    with agent.services.db.unit() as repos:
        assert repos.notes.get(trusted_note).priority == 1  # like the owner's
    first = agent.tick()
    [asked] = [e for e in first["executed"] if e["type"] == "search.web"]
    assert asked["status"] == "executed", asked  # a trusted person's words: the standing approval counts
    guest_note = arrive(agent, "@greta:hs", "Could you look up figs in honey?", "$g")
    with agent.services.db.unit() as repos:
        assert repos.notes.get(guest_note).priority == 0
    second = agent.tick()
    [parked] = [e for e in second["executed"] if e["type"] == "search.web"]
    assert parked["status"] == "pending_approval"  # a guest may ask; the owner decides
    with agent.services.db.unit() as repos:
        [approval] = [a for a in repos.approvals.pending() if a.type == "search.web"]
        assert "a guest may ask, my owner decides" in approval.reason and "Greta" in approval.reason
        decisions = [
            (e.actor, e.decision)
            for e in repos.session.scalars(
                select(AuditEntry).where(AuditEntry.type == "search.web").order_by(AuditEntry.id)
            )
        ]
        assert ("policy", "auto_approved") in decisions or ("policy", "executed") in decisions
        assert ("loop", "requested") in decisions  # parked, not run by the standing approval
