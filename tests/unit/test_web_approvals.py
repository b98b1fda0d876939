"""Approvals over the API and the page: what waits is shown with its arguments, effect and why; an approval given
on the web runs exactly once at the persona's next tick (the same decision `run.py approve` makes, in the audit
log); a denial needs a reason, which the persona reads; a decided approval cannot be decided again."""

from __future__ import annotations

import json

from tests.fakes.llm import FakeLLM


def block(*commands: tuple[str, dict]) -> str:
    items = [
        {"cmd_id": f"c{i}", "type": t, "args": a, "description": "I want to be calmer."}
        for i, (t, a) in enumerate(commands, 1)
    ]
    return "I will change.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def park(web, *commands: tuple[str, dict]) -> FakeLLM:
    fake = web.agent.services.llms.providers["fake"]
    fake.responses = [block(*commands), "Thinking.", "Thinking on."]
    state = web.agent.tick()
    assert {e["status"] for e in state["executed"]} == {"pending_approval"}, state["executed"]
    return fake


def by_type(web) -> dict[str, dict]:
    return {a["type"]: a for a in web.client.get("/api/approvals").json()["items"]}


def test_an_approval_given_on_the_api_runs_exactly_once_at_the_next_tick(web):
    park(web, ("identity.update", {"text": "I am calmer now."}))
    pending = by_type(web)["identity.update"]
    assert pending["status"] == "pending" and pending["effect"] == "modify_self"
    assert pending["args"] == {"text": "I am calmer now."} and pending["description"] == "I want to be calmer."
    assert pending["tick"] == 1 and pending["thread_id"] == "main" and "approval" in pending["reason"]

    answer = web.client.post(f"/api/approvals/{pending['id']}/approve", json={"reason": "fine by me"})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "approved" and answer.json()["decided_by"] == "owner (web, loopback)"
    again = web.client.post(f"/api/approvals/{pending['id']}/approve", json={})
    assert again.status_code == 409 and "not pending" in again.json()["error"]

    web.agent.tick()
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        assert repos.blocks.get("core").content.count("I am calmer now.") == 1
    detail = web.client.get(f"/api/approvals/{pending['id']}").json()
    assert detail["status"] == "executed" and detail["result"]
    assert [(e["decision"], e["actor"]) for e in detail["audit"]] == [
        ("requested", "loop"),
        ("approved", "human"),
        ("executed", "human"),
    ]
    assert detail["audit"][1]["reason"] == "owner (web, loopback): fine by me"  # the door, then the reason
    assert web.client.get("/api/approvals").json() == {"items": [], "pending": 0}
    assert [a["id"] for a in web.client.get("/api/approvals?status=executed").json()["items"]] == [pending["id"]]


def test_a_denial_needs_a_reason_and_the_persona_reads_it(web):
    fake = park(web, ("notepad.clear", {}))
    approval = by_type(web)["notepad.clear"]
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        refused = web.client.post(f"/api/approvals/{approval['id']}/deny", json=body)
        assert refused.status_code == 422 and refused.json()["field"] == "reason", refused.json()
    assert web.client.get(f"/api/approvals/{approval['id']}").json()["status"] == "pending"

    denied = web.client.post(f"/api/approvals/{approval['id']}/deny", json={"reason": "keep the rope on the list"})
    assert denied.status_code == 200
    assert denied.json()["status"] == "denied" and denied.json()["decision_reason"] == "keep the rope on the list"
    assert web.client.post(f"/api/approvals/{approval['id']}/approve").status_code == 409
    web.agent.tick()
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert f"my human denied notepad.clear {{}} (approval {approval['id']}): keep the rope on the list" in prompt
    with web.agent.services.db.unit() as repos:
        assert repos.approvals.get(approval["id"]).status == "denied"
        assert repos.commands.get(repos.approvals.get(approval["id"]).cmd_key).status == "denied"
    assert web.client.get("/api/approvals/999").status_code == 404
    assert web.client.post("/api/approvals/999/deny", json={"reason": "no"}).status_code == 404


def test_the_page_shows_what_waits_and_decides_it_in_place(web):
    park(web, ("identity.update", {"text": "I am <b>calmer</b>."}), ("notepad.clear", {}))
    approvals = by_type(web)
    page = web.client.get("/approvals")
    assert page.status_code == 200 and "identity.update" in page.text and "modify_self" in page.text
    assert "calmer" in page.text and "<b>calmer" not in page.text  # the persona's arguments are data, never markup
    assert "I want to be calmer." in page.text
    assert f'hx-post="/approvals/{approvals["identity.update"]["id"]}/approve"' in page.text
    assert 'id="badge-approvals" class="nav-badge" aria-label="2 waiting">2</mark>' in page.text  # what waits

    headers = {**web.csrf, "HX-Request": "true"}
    refused = web.client.post(
        f"/approvals/{approvals['notepad.clear']['id']}/deny", data={"reason": " "}, headers=headers
    )
    assert refused.status_code == 422 and "<b>reason</b>" in refused.text
    denied = web.client.post(
        f"/approvals/{approvals['notepad.clear']['id']}/deny", data={"reason": "no"}, headers=headers
    )
    assert denied.status_code == 200 and 'data-testid="decision"' in denied.text and "denied" in denied.text
    approved = web.client.post(
        f"/approvals/{approvals['identity.update']['id']}/approve", data={"reason": ""}, headers=headers
    )
    assert approved.status_code == 200 and "approved" in approved.text and "runs once" in approved.text
    twice = web.client.post(f"/approvals/{approvals['identity.update']['id']}/approve", data={}, headers=headers)
    assert twice.status_code == 409 and 'class="error"' in twice.text

    web.agent.tick()
    overview = web.client.get("/approvals/overview").text
    assert 'data-testid="no-pending"' in overview and "executed" in overview and "denied" in overview
    assert "owner (web, loopback)" in overview
