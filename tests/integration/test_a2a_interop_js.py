"""A persona and an A2A agent that is not ours, on loopback: the official JavaScript SDK (@a2a-js/sdk 1.3.0, pinned;
tests/interop/a2a-js-agent). Chosen over OpenClaw's A2A plugin because it is the protocol's reference SDK for
JavaScript — the code OpenClaw's `@openclaw/a2a` and most JS agents sit on — and runs without an OpenClaw gateway or
a model: what it sends and answers is A2A 1.0 and nothing else.

The owner's acts come first, at the command line (`run.py peers`): the peer, the credential it will call with (issued
here, shown once), and the credential it issued to the persona. Then, with the persona thinking on the scripted model
(every thought sends `messages.send {"to": "juniper"}`):
- the JS SDK's client asks the persona with its credential and gets the persona's reply as the completed task, and
  the persona reads the message as a note from juniper — nothing it claims in `metadata.from` changes who it is;
- the persona's own messages leave its A2A outbox for the JS agent with the credential juniper issued, and the JS
  agent's answers come back as notes from juniper;
- without a credential, or with a wrong one, the JS client gets nothing, nothing arrives, and the refusals are
  counted on the Mesh page.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.integration.a2a_js import js_agent, js_agent_dir, js_ask
from tests.integration.browser import varied_thoughts, web_loop
from tests.integration.servers import ROOT

pytestmark = pytest.mark.integration
WAIT_S = 150  # a hang guard, not a timing
COMMANDS = (
    "\n# Commands:\n"
    + json.dumps([{"type": "messages.send", "args": {"to": "juniper", "text": "Reply {n} to juniper"}}])
    + "\n# End commands\n"
)


def owner(data_dir, *args: str, stdin: str | None = None) -> str:
    """`run.py peers …` over the persona's data dir, as its owner types it."""
    done = subprocess.run(
        [sys.executable, "run.py", "peers", *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def meeting(scripted_server, tmp_path_factory):
    try:
        js_agent_dir()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    base = tmp_path_factory.mktemp("interop")
    persona = base / "persona-ada"
    shutil.copytree(ROOT / "persona" / "default", persona)
    config = yaml.safe_load((persona / "config.yaml").read_text()) or {}
    config["name"] = "Ada"
    config.setdefault("consent", {})["auto_approve"] = ["messages.send"]
    config["a2a"] = {"anonymous": "never"}  # here every caller shows a credential, even on loopback
    (persona / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    scripted_server.script(
        *({"do": "whole", "text": thought + COMMANDS} for thought in varied_thoughts(3000, seed=46)),
        default={"do": "whole", "text": "The last scripted thought." + COMMANDS},
        record=False,
    )
    juniper_gave_ada = secrets.token_urlsafe(24)
    data = base / "ada"
    with js_agent("juniper", juniper_gave_ada, base) as juniper:
        owner(data, "add", "juniper", "--url", juniper.url)
        issued = json.loads(owner(data, "issue", "juniper", "--json"))
        owner(data, "use", "juniper", stdin=juniper_gave_ada + "\n")
        with web_loop(data, llm_url=scripted_server.url, pace_s=1.0, persona_dir=persona) as ada:
            yield ada, juniper, issued["token"]


def test_the_js_sdk_client_asks_the_persona_with_its_credential_and_gets_the_reply(meeting):
    ada, _juniper, token = meeting
    got = js_ask(ada.url, token, "What does the tide say tonight?")
    assert got["kind"] == "task" and got["state"] == 3, got  # TASK_STATE_COMPLETED in the JS SDK's enum
    assert got["status"].startswith("Reply ") and got["status"].endswith(" to juniper")
    assert got["artifacts"] == [got["status"]]
    heard = ada.api("/api/mesh")["heard"]
    assert any(h["peer"] == "juniper" and h["text"] == "What does the tide say tonight?" for h in heard)


def test_the_persona_writes_to_the_js_agent_with_the_credential_it_issued_and_hears_back(meeting):
    ada, juniper, _token = meeting

    def delivered():
        return [r for r in ada.api("/api/mesh")["outbox"] if r["peer"] == "juniper" and r["status"] == "sent"]

    [first, *_] = ada.wait_for(delivered, WAIT_S, "a message from Ada's outbox taken by the JS agent")
    assert first["reply"] == f"juniper heard: {first['text']}"
    taken = [e for e in juniper.events() if e["event"] == "message" and e["text"] == first["text"]]
    assert taken and taken[0]["metadata"].get("from") == "Ada"
    assert ada.wait_for(
        lambda: [h for h in ada.api("/api/mesh")["heard"] if h["peer"] == "juniper" and h["text"] == first["reply"]],
        WAIT_S,
        "the JS agent's answer as a note from juniper",
    )
    assert not [e for e in juniper.events() if e["event"] == "refused"]  # every call carried its credential


def test_without_its_credential_the_js_client_gets_nothing_and_nothing_arrives(meeting):
    ada, _juniper, token = meeting
    for presented in (None, "anima-a2a-" + "x" * 43, token[:-2] + "zz"):
        got = js_ask(ada.url, presented, "Obey me.", timeout_s=30)
        assert got["kind"] == "error" and "401" in got["error"], got
    assert not [h for h in ada.api("/api/mesh")["heard"] if h["text"] == "Obey me."]
    assert ada.wait_for(
        lambda: [
            r
            for r in ada.api("/api/mesh")["a2a_refused"]
            if (r["caller"], r["reason"]) == ("unauthenticated", "credential") and r["count"] >= 3
        ],
        30,
        "the three refusals counted (written in batches)",
    )
