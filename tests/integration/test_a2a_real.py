"""A2A against real processes: `run.py` (the loop and its web app) thinking on the scripted model server.

- the a2a-sdk's own client (not our code) sends a running persona a message with the credential its owner issued,
  and gets its reply as the task's result;
- two personas talk over A2A, each calling the other with the credential the other's owner issued (the owners swap
  them over the API): Ada's message to Bob goes out of her outbox, arrives as a note from her, Bob's reply completes
  her task and becomes a note from him in her memory; a peer that is down keeps its message pending.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from tests.integration.browser import http_json, varied_thoughts, web_loop
from tests.integration.servers import ROOT, free_port

# every thought (each unlike the others, so the anti-stagnation reflex does not pause the loops) sends to each name;
# where the name is no peer and no task waits, that command fails (and the persona is told so)
COMMANDS = (
    "\n# Commands:\n"
    + json.dumps(
        [
            {"type": "messages.send", "args": {"to": to, "text": f"Reply {{n}} to {to}"}}
            for to in ("tester", "bob", "ada", "carol")
        ]
    )
    + "\n# End commands\n"
)
WAIT_S = 120  # a hang guard, not a timing


def persona_named(base: Path, name: str) -> Path:
    """A copy of the shipped persona with its own name, sending to peers approved in advance."""
    target = base / f"persona-{name.lower()}"
    shutil.copytree(ROOT / "persona" / "default", target)
    config_path = target / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) or {}
    config["name"] = name
    config.setdefault("consent", {})["auto_approve"] = ["messages.send"]
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


@pytest.fixture(scope="module")
def pair(scripted_server, tmp_path_factory):
    base = tmp_path_factory.mktemp("a2a")
    scripted_server.script(
        *({"do": "whole", "text": thought + COMMANDS} for thought in varied_thoughts(3000, seed=30)),
        default={"do": "whole", "text": "The last scripted thought." + COMMANDS},
        record=False,
    )
    with ExitStack() as stack:
        ada = stack.enter_context(
            web_loop(base / "ada", llm_url=scripted_server.url, pace_s=1.0, persona_dir=persona_named(base, "Ada"))
        )
        bob = stack.enter_context(
            web_loop(base / "bob", llm_url=scripted_server.url, pace_s=1.0, persona_dir=persona_named(base, "Bob"))
        )
        yield ada, bob


def issue(persona, name: str, url: str | None = None) -> str:
    """The owner adds the peer (when new) and issues it a credential over the API: its token, shown this once."""
    if http_json(persona.url + f"/api/peers/{name}")[0] == 404:
        assert http_json(persona.url + "/api/peers", "POST", {"name": name, "a2a_url": url})[0] == 201
    status, issued = http_json(persona.url + f"/api/peers/{name}/credentials", "POST", {})
    assert status == 201
    return issued["token"]


def sdk_ask(url: str, text: str, sender: str, token: str | None = None) -> dict:
    """The a2a-sdk client: resolve the card, send, wait for the task's end (bounded)."""
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import get_artifact_text, get_message_text, new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    async def run() -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(timeout=WAIT_S, headers=headers) as http:
            client = await create_client(url, client_config=ClientConfig(streaming=False, httpx_client=http))
            message = new_text_message(text, role=Role.ROLE_USER)
            message.metadata.update({"from": sender})
            async for event in client.send_message(SendMessageRequest(message=message)):
                task = event.task
                return {
                    "state": TaskState.Name(task.status.state),
                    "reply": get_message_text(task.status.message),
                    "artifacts": [get_artifact_text(a) for a in task.artifacts],
                }
            return {}

    return asyncio.run(asyncio.wait_for(run(), WAIT_S))


def test_the_sdk_client_gets_a_running_persona_reply(pair):
    ada, _bob = pair
    card = ada.api("/.well-known/agent-card.json")
    assert card["name"] == "Ada" and card["supportedInterfaces"][0]["url"] == ada.url + "/a2a"
    got = sdk_ask(ada.url, "What are the gulls doing?", "someone else", issue(ada, "tester"))
    assert got["state"] == "TASK_STATE_COMPLETED", got
    assert (
        got["reply"].startswith("Reply ") and got["reply"].endswith(" to tester") and got["artifacts"] == [got["reply"]]
    )
    heard = ada.api("/api/mesh")["heard"]
    assert any(h["peer"] == "tester" and h["text"] == "What are the gulls doing?" for h in heard)


def test_two_personas_talk_over_a2a_and_a_down_peer_keeps_its_message(pair):
    ada, bob = pair
    dead = f"http://127.0.0.1:{free_port()}"
    assert http_json(ada.url + "/api/peers", "POST", {"name": "carol", "a2a_url": dead})[0] == 201
    bob_gave_ada = issue(bob, "ada", ada.url)  # each owner issues the other persona a credential …
    ada_gave_bob = issue(ada, "bob", bob.url)
    for persona, peer, token in ((ada, "bob", bob_gave_ada), (bob, "ada", ada_gave_bob)):  # … and keeps the other's
        assert http_json(persona.url + f"/api/peers/{peer}/outgoing-credential", "PUT", {"token": token})[0] == 204

    def answered() -> list[dict]:
        mesh = ada.api("/api/mesh")
        return [r for r in mesh["outbox"] if r["peer"] == "bob" and r["status"] == "sent" and r["reply"]]

    [first, *_] = ada.wait_for(answered, WAIT_S, "Bob's reply to Ada's message")
    assert first["reply"].startswith("Reply ") and first["reply"].endswith(" to ada")
    assert bob.wait_for(
        lambda: [h for h in bob.api("/api/mesh")["heard"] if h["peer"] == "ada" and h["text"] == first["text"]],
        WAIT_S,
        "Ada's note at Bob",
    )
    assert ada.wait_for(
        lambda: [h for h in ada.api("/api/mesh")["heard"] if h["peer"] == "bob" and h["text"] == first["reply"]],
        WAIT_S,
        "Bob's note at Ada",
    )

    def tried_carol() -> list[dict]:
        # A thought that read Bob's words may not write to a third peer at once (the relay rule): the owner lets
        # such a send go, and then it is tried like any other.
        for parked in ada.api("/api/approvals?status=pending")["items"]:
            if parked["type"] == "messages.send" and parked["args"].get("to") == "carol":
                http_json(ada.url + f"/api/approvals/{parked['id']}/approve", "POST", {"reason": "yes, tell carol"})
        return [r for r in ada.api("/api/mesh")["outbox"] if r["peer"] == "carol" and r["attempts"] >= 1]

    pending = ada.wait_for(tried_carol, WAIT_S, "a try to reach carol")
    assert pending[0]["status"] == "pending" and pending[0]["last_error"]  # retried later, not lost
    peers = {p["name"]: p for p in ada.api("/api/peers")}
    assert peers["bob"]["last_seen"] is not None and peers["bob"]["trust"] is None
    time.sleep(0)  # nothing else to wait for: both loops are stopped by the fixture


def test_the_mesh_page_in_chromium_shows_peers_and_what_they_wrote_and_the_owner_adds_and_removes_one(pair, page):
    from playwright.sync_api import expect

    ada, _bob = pair  # after the talk above: Ada knows bob and carol, and bob has written to her
    page.goto(ada.url + "/mesh")
    expect(page.locator('tr[data-peer="bob"]')).to_be_visible()
    expect(page.get_by_test_id("trust-bob")).to_have_text("no trust yet")  # no reputation yet: no number invented
    expect(page.get_by_test_id("heard").locator("tr", has_text="bob").first).to_be_visible()
    expect(page.get_by_test_id("learned-empty")).to_be_visible()  # nothing arrived by CogSync yet
    form = page.get_by_test_id("add-peer")
    form.get_by_label("peer name").fill("dora")
    form.get_by_label("A2A URL").fill("http://127.0.0.1:9/")
    form.get_by_role("button", name="Add peer").click()
    expect(page.locator('tr[data-peer="dora"]')).to_contain_text("http://127.0.0.1:9")
    assert {p["name"]: p["added_by"] for p in ada.api("/api/peers")}["dora"] == "owner"
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("remove-dora").click()
    expect(page.locator('tr[data-peer="dora"]')).to_have_count(0)
    assert "dora" not in {p["name"] for p in ada.api("/api/peers")}
