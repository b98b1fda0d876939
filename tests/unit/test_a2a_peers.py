"""Peers' credentials and the A2A conversation's rules (managers/peers.py), and the owner's doors to them (the API,
the Mesh page, `run.py peers`): a credential per peer, only its hash kept, shown once, revoked; the credential a
peer issued to the persona kept as a secret; names no peer may take; what one caller and all callers may leave
unanswered; replies that ask back, decline, or carry data and files — down to what the a2a-sdk client receives."""

from __future__ import annotations

import io
import json
import stat
import tarfile
import threading
from datetime import UTC, datetime, timedelta

import pytest

from managers import ManagerDeps, Managers
from managers.errors import NotFound, Refused
from managers.peers import TOKEN_PREFIX, InboundLimits, Overloaded, token_hash
from memory import Database
from tests.fakes.managers import managers_over

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def house(tmp_path):
    from persona.settings import load_settings

    db = Database.open(tmp_path)
    settings = load_settings(data_dir=str(tmp_path))

    def unit():
        class Unit:
            def __enter__(self):
                self._cm = db.unit()
                return Managers(self._cm.__enter__(), ManagerDeps(settings=settings, clock=lambda: NOW))

            def __exit__(self, *exc):
                return self._cm.__exit__(*exc)

        return Unit()

    yield unit
    db.close()


def test_a_credential_is_shown_once_kept_as_its_hash_and_opens_only_as_its_peer(house, tmp_path):
    with house() as m:
        m.peers.add("bob", added_by="owner")
        row, token = m.peers.issue_credential("bob", by="owner (cli)")
        assert token.startswith(TOKEN_PREFIX) and len(token) > 50 and row.hint == token[: len(TOKEN_PREFIX) + 4]
        assert row.token_hash == token_hash(token) and row.issued_by == "owner (cli)"
    with house() as m:
        assert m.peers.authenticate(token).name == "bob"
        assert m.peers.credentials("bob")[0].last_used_at is not None
        assert m.peers.authenticate(token[:-1]) is None and m.peers.authenticate("bob") is None
    assert token.encode() not in (tmp_path / "anima.sqlite").read_bytes()


def test_revoked_and_removed_peers_credentials_open_nothing_and_a_new_peer_of_that_name_inherits_none(house):
    with house() as m:
        m.peers.add("bob", added_by="owner")
        (first, one), (_second, two) = m.peers.issue_credential("bob"), m.peers.issue_credential("bob")
        assert [c.id for c in m.peers.revoke_credentials("bob", first.id)] == [first.id]
        with pytest.raises(NotFound):
            m.peers.revoke_credentials("bob", 999)
    with house() as m:
        assert m.peers.authenticate(one) is None and m.peers.authenticate(two).name == "bob"
        m.peers.remove("bob")
        m.peers.add("bob", added_by="owner")
        assert m.peers.authenticate(two) is None and m.peers.credentials("bob") == []


# (name, why): names no peer may take — the owner's words in any case, a person's, the anonymous callers'
SHADOWS = [
    ("user", "names my human"),
    ("User", "names my human"),
    ("OWNER", "names my human"),
    ("Human", "names my human"),
    ("system", "names my human"),
    ("Carol", "name of a person"),
    ("carol", "name of a person"),
    ("a2a-bob", "anonymous A2A callers"),
]


@pytest.mark.parametrize("name,why", SHADOWS)
def test_a_peer_may_not_take_a_name_that_shadows_a_person(house, name, why):
    with house() as m:
        m.people.add("Carol", role="trusted")
        with pytest.raises(Refused, match=why):
            m.peers.add(name, added_by="owner")


def test_the_credential_a_peer_issued_to_the_persona_is_a_0600_secret_never_in_the_database(house, tmp_path):
    with house() as m:
        m.peers.add("bob", added_by="owner")
        m.peers.set_outgoing_token("bob", "bobs-credential-for-ada")
        with pytest.raises(Refused, match="one line"):
            m.peers.set_outgoing_token("bob", "two words")
    with house() as m:
        assert m.peers.outgoing_token("bob") == "bobs-credential-for-ada" and m.peers.has_outgoing_token("bob")
    [kept] = (tmp_path / "secrets").iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert b"bobs-credential-for-ada" not in (tmp_path / "anima.sqlite").read_bytes()
    with house() as m:
        m.peers.remove("bob")
    assert list((tmp_path / "secrets").iterdir()) == []


def test_what_one_caller_and_all_callers_leave_unanswered_is_capped(house):
    limits = InboundLimits(max_chars=100, open_per_caller=2, open_total=3)
    with house() as m:
        for i in range(2):
            m.peers.incoming("a2a-x", f"anon {i}", task_id=f"t{i}", caller="anonymous", limits=limits)
        with pytest.raises(Overloaded, match="2 messages of this caller"):
            m.peers.incoming("a2a-y", "anon 3", task_id="t3", caller="anonymous", limits=limits)
        m.peers.add("bob", added_by="owner")
        m.peers.incoming("bob", "bob 1", task_id="b1", caller="peer:1", limits=limits)  # another caller: room
        with pytest.raises(Overloaded, match="3 messages wait"):
            m.peers.incoming("bob", "bob 2", task_id="b2", caller="peer:1", limits=limits)
        with pytest.raises(Refused, match="at most 100"):
            m.peers.incoming("bob", "z" * 101, task_id="b3", caller="peer:1", limits=limits)
        m.peers.send("bob", "Answered.", thread_id="main", llm_id=None, now=NOW)  # bob's answered: room again
        m.peers.incoming("bob", "bob 2", task_id="b2", caller="peer:1", limits=limits)
    with house() as m:
        old = m.repos.peers.inbound("t0")
        old.created_at = NOW - timedelta(days=2)  # a day on, an unanswered message counts no more
        m.repos.peers.flush()
        m.peers.incoming("a2a-z", "anon 4", task_id="t4", caller="anonymous", limits=limits)


def test_a_task_is_continued_only_by_its_caller_and_only_while_it_is_open(house):
    with house() as m:
        m.peers.add("bob", added_by="owner")
        m.peers.incoming("bob", "Where shall we meet?", task_id="t1", caller="peer:1")
        note, how = m.peers.send("bob", "Which city?", thread_id="main", llm_id=None, now=NOW, kind="question")
        assert "question" in how and m.repos.peers.inbound("t1").status == "asked"
        with pytest.raises(Refused, match="no task t1"):
            m.peers.incoming("a2a-x", "Paris (says an impostor).", task_id="t1", caller="anonymous")
        m.peers.incoming("bob", "Lisbon.", task_id="t1", caller="peer:1")
        assert m.repos.peers.inbound("t1").status == "waiting"
        m.peers.send("bob", "Lisbon it is.", thread_id="main", llm_id=None, now=NOW)
        assert m.peers.reply_for("t1").text == "Lisbon it is." and m.repos.peers.inbound("t1").status == "answered"
        with pytest.raises(Refused, match="answered"):
            m.peers.incoming("bob", "And then?", task_id="t1", caller="peer:1")
        assert m.peers.task_view("t1", "anonymous") is None and m.peers.task_view("t1", "peer:1") is not None


def test_replies_decline_carry_data_and_files_and_answer_the_task_of_the_note_named(house):
    parts = [
        {"kind": "data", "name": "data", "data": {"tide": "low"}},
        {"kind": "file", "name": "tides.txt", "media_type": "text/plain", "text": "low at six"},
    ]
    with house() as m:
        m.peers.add("bob", added_by="owner")
        first, _ = m.peers.incoming("bob", "First?", task_id="t1", caller="peer:1")
        second, _ = m.peers.incoming("bob", "Second?", task_id="t2", caller="peer:1")
        m.peers.send("bob", "The tides.", thread_id="main", llm_id=None, now=NOW, parts=parts, note_id=second.id)
        assert m.peers.reply_for("t1") is None  # the note named was the second's
        reply = m.peers.reply_for("t2")
        assert (reply.text, reply.kind, reply.parts) == ("The tides.", "answer", tuple(parts))
        m.peers.send("bob", "Not this one.", thread_id="main", llm_id=None, now=NOW, kind="decline")
        assert m.repos.peers.inbound("t1").status == "declined"
        with pytest.raises(Refused, match="no task of bob waits"):
            m.peers.send("bob", "No.", thread_id="main", llm_id=None, now=NOW, kind="decline")
        with pytest.raises(Refused, match="data and files go with an answer"):
            m.peers.send("bob", "Data.", thread_id="main", llm_id=None, now=NOW, parts=parts[:1])
        with pytest.raises(Refused, match="no A2A message of bob waiting"):
            m.peers.send("bob", "Again.", thread_id="main", llm_id=None, now=NOW, note_id=first.id)


def test_a_cancelled_task_takes_no_reply_and_only_its_caller_cancels_it(house):
    with house() as m:
        m.peers.add("bob", a2a_url="http://127.0.0.1:9", added_by="owner")
        m.peers.incoming("bob", "Never mind.", task_id="t1", caller="peer:1")
        assert not m.peers.cancel("t1", "anonymous") and m.peers.cancel("t1", "peer:1")
        _note, how = m.peers.send("bob", "Here it is.", thread_id="main", llm_id=None, now=NOW)
        assert "outbox" in how and m.repos.peers.inbound("t1").reply_note_id is None


# ---- through the persona's messages.send and the a2a-sdk client ------------------------------------------------------


def _block(*commands: dict) -> str:
    return "I answer.\n# Commands:\n" + json.dumps(list(commands)) + "\n# End commands\n"


def _conversation(app, token: str, first: str, then: str, go_on: threading.Event) -> dict:
    """The a2a-sdk client sends `first`, and once `go_on` is set, `then` into the same task: what each got. One event
    loop for both (over ASGI the SDK's tasks live in the caller's loop)."""
    import asyncio

    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import get_message_text, new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    async def run() -> dict:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        ) as http:
            client = await create_client(
                "http://127.0.0.1", client_config=ClientConfig(streaming=False, httpx_client=http)
            )

            async def send(text: str, task_id: str | None = None) -> dict:
                message = new_text_message(text, role=Role.ROLE_USER)
                if task_id:
                    message.task_id = task_id
                async for event in client.send_message(SendMessageRequest(message=message)):
                    task = event.task
                    return {
                        "id": task.id,
                        "state": TaskState.Name(task.status.state),
                        "status": get_message_text(task.status.message),
                        "artifacts": [MessageToDict(a) for a in task.artifacts],
                    }
                return {}

            got = {"first": await send(first)}
            await asyncio.to_thread(go_on.wait, 30)
            got["second"] = await send(then, got["first"]["id"])
            return got

    return asyncio.run(run())


def test_the_persona_asks_back_then_answers_with_data_and_a_file_and_the_sdk_client_sees_it(agent_factory, tmp_path):
    from fastapi.testclient import TestClient

    from persona.settings import Overrides
    from tests.fakes.llm import FakeLLM
    from web.app import create_app
    from web.context import WebServices

    agent = agent_factory(
        FakeLLM(
            "fake",
            responses=[
                _block({"type": "messages.send", "args": {"to": "bob", "text": "Which tide?", "ask": True}}),
                _block(
                    {
                        "type": "messages.send",
                        "args": {
                            "to": "bob",
                            "text": "Here.",
                            "data": {"tide": "low", "at": 6},
                            "file": {"name": "tides.txt", "text": "low at six"},
                        },
                    }
                ),
            ],
        ),
        consent={"auto_approve": ["messages.send"]},
    )
    services = WebServices(
        db=agent.services.db,
        overrides=Overrides.of(data_dir=str(tmp_path)),
        clock=agent.services.clock,
        _memory=agent.services.memory,
    )
    app = create_app(services=services)
    with agent.services.db.unit() as repos:
        managers_over(repos).peers.add("bob", added_by="owner")
        token = managers_over(repos).peers.issue_credential("bob")[1]
    got: dict = {}
    go_on = threading.Event()

    def tick_once_a_message_waits() -> None:
        for _ in range(600):
            with agent.services.db.unit() as repos:
                if repos.peers.waiting_all():
                    break
            threading.Event().wait(0.05)
        agent.tick()

    with TestClient(app, base_url="http://127.0.0.1"):
        asker = threading.Thread(
            target=lambda: got.update(_conversation(app, token, "Tell me the tide.", "Tonight's.", go_on))
        )
        asker.start()
        tick_once_a_message_waits()
        for _ in range(600):  # the question reached the caller
            with agent.services.db.unit() as repos:
                if repos.peers.inbound_of_note(repos.notes.list(source="peer")[0].id).status == "asked":
                    break
            threading.Event().wait(0.05)
        go_on.set()
        tick_once_a_message_waits()
        asker.join(timeout=60)
    assert got["first"]["state"] == "TASK_STATE_INPUT_REQUIRED" and got["first"]["status"] == "Which tide?"
    second = got["second"]
    assert second["id"] == got["first"]["id"] and second["state"] == "TASK_STATE_COMPLETED"
    assert second["status"] == "Here."
    [data, file] = second["artifacts"]
    assert data["parts"] == [{"data": {"tide": "low", "at": 6.0}, "mediaType": "application/json"}]
    assert file["parts"][0]["filename"] == "tides.txt" and file["parts"][0]["mediaType"] == "text/plain"


# (args, why): what messages.send refuses before it runs
BAD_REPLIES = [
    ({"to": "bob", "text": "x", "ask": True, "decline": True}, "at most one"),
    ({"to": "bob", "text": "x", "ask": True, "data": {"a": 1}}, "not with a question"),
    ({"to": "bob", "text": "x", "file": {"name": "a.txt"}}, "its text or its url"),
    ({"to": "bob", "text": "x", "file": {"name": "../etc/passwd", "text": "x"}}, "file.name"),
    ({"to": "bob", "text": "x", "file": {"name": "a", "url": "javascript:alert(1)"}}, "file.url"),
]


@pytest.mark.parametrize("args,why", BAD_REPLIES)
def test_a_malformed_reply_is_refused_with_its_reason(args, why):
    from nodes.commands.args import ArgsError, check_args
    from nodes.commands.messages import MessageArgs

    with pytest.raises(ArgsError, match=why):
        check_args("messages.send", MessageArgs, args)


# ---- the owner's doors: the API, the Mesh page, run.py peers
# ----------------------------------------------------------


def test_the_owner_issues_and_revokes_over_the_api_and_the_token_is_shown_once(web):
    assert web.client.post("/api/peers", json={"name": "bob"}).status_code == 201
    issued = web.client.post("/api/peers/bob/credentials")
    assert issued.status_code == 201
    token, credential = issued.json()["token"], issued.json()["credential"]
    assert credential["hint"].endswith("…") and credential["issued_by"] == "owner (web, loopback)"
    for shown in (
        web.client.get("/api/peers/bob"),
        web.client.get("/api/peers"),
        web.client.get("/api/mesh"),
        web.client.get("/mesh"),
    ):
        assert token not in shown.text and token[: len(TOKEN_PREFIX) + 4] in shown.text
    assert web.client.post("/api/peers/nobody/credentials").status_code == 404
    assert web.client.put("/api/peers/bob/outgoing-credential", json={"token": "has space"}).status_code == 422
    assert web.client.put("/api/peers/bob/outgoing-credential", json={"token": "+\u0085"}).status_code == 422
    assert web.client.put("/api/peers/bob/outgoing-credential", json={"token": " padded "}).status_code == 422
    assert web.client.put("/api/peers/bob/outgoing-credential", json={"token": "from-bob"}).status_code == 204
    assert "from-bob" not in web.client.get("/api/peers/bob").text
    export = web.client.get("/api/persona/export")
    assert export.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(export.content)) as archive:  # the whole persona: no secret, no token
        for member in archive.getmembers():
            body = archive.extractfile(member).read() if member.isfile() else b""
            assert b"from-bob" not in body and token.encode() not in body, member.name
    revoked = web.client.delete(f"/api/peers/bob/credentials/{credential['id']}")
    assert revoked.status_code == 200 and revoked.json()[0]["revoked_at"] is not None
    assert web.client.delete("/api/peers/bob/credentials/999").status_code == 404
    with web.agent.services.db.unit() as repos:
        assert managers_over(repos).peers.authenticate(token) is None


def test_the_mesh_page_issues_a_credential_shows_it_once_and_revokes(web):
    assert web.client.post("/api/peers", json={"name": "bob"}).status_code == 201
    page = web.client.post("/mesh/peers/bob/credentials", headers=web.csrf)
    assert page.status_code == 200 and 'data-testid="issued-token"' in page.text
    token = page.text.split('data-testid="issued-token">', 1)[1].split("<", 1)[0]
    assert token.startswith(TOKEN_PREFIX) and token not in web.client.get("/mesh").text
    revoked = web.client.post("/mesh/peers/bob/credentials/revoke", headers=web.csrf)
    assert revoked.status_code == 200 and 'data-testid="revoke-bob"' not in revoked.text
    with web.agent.services.db.unit() as repos:
        assert managers_over(repos).peers.authenticate(token) is None


def test_the_owner_issues_lists_revokes_and_keeps_a_peers_credential_at_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from cli import app

    runner = CliRunner()
    data = ["--data-dir", str(tmp_path)]
    assert runner.invoke(app, ["peers", "add", "bob", "--url", "http://127.0.0.1:9", *data]).exit_code == 0
    assert runner.invoke(app, ["peers", "add", "Owner", *data]).exit_code == 1
    issued = json.loads(runner.invoke(app, ["peers", "issue", "bob", "--json", *data]).stdout)
    assert issued["token"].startswith(TOKEN_PREFIX)
    plain = runner.invoke(app, ["peers", "issue", "bob", *data])
    assert plain.exit_code == 0 and plain.stdout.strip().startswith(TOKEN_PREFIX)  # the token alone on stdout
    kept = runner.invoke(app, ["peers", "use", "bob", *data], input="from-bob-for-me\n")
    assert kept.exit_code == 0 and "from-bob-for-me" not in kept.stdout
    listed = json.loads(runner.invoke(app, ["peers", "list", "--json", *data]).stdout)
    assert listed[0]["holds_theirs"] and len(listed[0]["credentials"]) == 2
    assert issued["token"] not in json.dumps(listed)
    revoked = runner.invoke(app, ["peers", "revoke", "bob", "--id", str(issued["credential"]["id"]), *data])
    assert revoked.exit_code == 0 and "revoked 1" in revoked.stdout
    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            assert managers_over(repos).peers.authenticate(issued["token"]) is None
            assert managers_over(repos).peers.authenticate(plain.stdout.strip()).name == "bob"
    finally:
        db.close()
