"""The one way in against the real counterparts: a person's words by Matrix (a real Synapse), e-mail (a real Dovecot
and SMTP), Telegram (the Bot API stand-in) and an MCP client (the served app's /mcp) are found by `memory.search`
later, with their author; and on Matrix, a message to the owner who wrote in a room a guest shares goes to a room
they alone read (scope by audience). Every wait is bounded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from channels.runner import ChannelRunner
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over
from tests.integration import mail_servers, telegram_bot_api
from tests.integration.matrix_human import MatrixHuman
from tests.integration.matrix_sender import matrix_settings
from tests.integration.test_channels_runner_email_telegram import email_entry, run_until, settings_with
from tests.integration.test_email_channel import ANIMA, ANN, ann_sends
from tests.integration.test_telegram_channel import ANN as TG_ANN
from tests.integration.test_telegram_channel import TOKEN, control
from tests.unit.test_conversation import search

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
ANIMA_PASSWORD = "anima-conv-pw"


def notes_of(agent: Any) -> list[Any]:
    with agent.services.db.unit() as repos:
        return list(repos.notes.list(limit=100))


def test_a_mail_is_found_by_memory_search_with_its_author(tmp_path: Path, monkeypatch) -> None:
    if mail_servers.missing():
        pytest.skip(str(mail_servers.missing()))
    with mail_servers.running() as servers:
        monkeypatch.setenv("MAILTG_TEST_EMAIL_PASSWORD", mail_servers.USERS[ANIMA])
        entry = email_entry(servers)
        agent = make_agent(tmp_path, FakeLLM("fake"))
        with agent.services.db.unit() as repos:
            people = managers_over(repos).people
            people.add_identity(people.owner().id, "email", ANN)
        ann_sends(servers, "<conv-root@example.org>", "Lanterns", "The paper lanterns float on the river tonight.")
        run_until(
            ChannelRunner(agent.services.db, settings_with(entry)),
            lambda: any("lanterns" in n.text for n in notes_of(agent)),
        )
        [note] = [n for n in notes_of(agent) if "lanterns" in n.text]
        assert (note.door, note.source) == ("email", "channel")
        found = search(agent, "paper lanterns river")
        assert "User: The paper lanterns float on the river tonight." in found, found  # the owner, by name
        agent.services.db.close()


def test_a_telegram_message_is_found_by_memory_search_with_its_author(tmp_path: Path, monkeypatch) -> None:
    from persona.settings import ChannelEntry

    with telegram_bot_api.serving(TOKEN) as bot_api:
        monkeypatch.setenv("MAILTG_TEST_TELEGRAM_TOKEN", TOKEN)
        entry = ChannelEntry(
            kind="telegram",
            name="telegram",
            options={"api_url": bot_api, "timeout_s": "10"},
            secret_env={"token": "MAILTG_TEST_TELEGRAM_TOKEN"},
        )
        agent = make_agent(tmp_path, FakeLLM("fake"))
        with agent.services.db.unit() as repos:
            people = managers_over(repos).people
            tom = people.add("Tom", role="trusted")
            people.add_identity(tom.id, "telegram", str(TG_ANN["id"]))
        control(bot_api, "message", {"chat_id": TG_ANN["id"], "user": TG_ANN, "text": "The cobalt kite is stuck."})
        run_until(
            ChannelRunner(agent.services.db, settings_with(entry)),
            lambda: any("cobalt" in n.text for n in notes_of(agent)),
        )
        found = search(agent, "cobalt kite")
        assert "Tom: The cobalt kite is stuck." in found, found
        agent.services.db.close()


def test_an_mcp_clients_note_is_found_by_memory_search(served) -> None:
    """The served app's MCP server (its Streamable HTTP endpoint): a client posts a note, then searches the
    persona's memory through the same server and finds it."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    from memory import Database

    async def post_then_search() -> tuple[Any, Any]:
        async with streamablehttp_client(f"{served.url}/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                posted = await session.call_tool("post_note", {"text": "The juniper hedge needs trimming."})
                found = await session.call_tool("search_memory", {"query": "juniper hedge", "k": 10})
                return posted, found

    posted, found = asyncio.run(asyncio.wait_for(post_then_search(), 60))
    assert not posted.isError and not found.isError, (posted, found)
    hits = json.loads(found.content[0].text)["hits"]
    assert any(h["text"] == "The juniper hedge needs trimming." for h in hits), hits
    db = Database.open(served.data_dir)
    try:
        with db.unit() as repos:
            [note] = [n for n in repos.notes.list(limit=200) if "juniper" in n.text]
            assert (note.door, note.tags) == ("mcp", ["via:mcp"])
            item = repos.items.find("message", f"note:{note.id}")
            assert item is not None and item.meta.get("origin") == "mcp_client" and item.author
    finally:
        db.close()


@pytest.fixture(scope="module")
def accounts(synapse) -> dict[str, str]:
    return {
        "anima": synapse.register("anima-c", ANIMA_PASSWORD),
        "ada": synapse.register("ada-c", "ada-pw"),
        "eve": synapse.register("eve-c", "eve-pw"),
    }


def test_on_matrix_a_message_is_remembered_and_the_answer_to_the_owner_avoids_a_shared_room(
    synapse, accounts, tmp_path: Path, monkeypatch
) -> None:

    monkeypatch.setenv("MATRIX_TEST_PASSWORD", ANIMA_PASSWORD)
    answer = (
        "I answer my owner.\n# Commands:\n"
        + json.dumps([{"type": "messages.send", "args": {"text": "Private: the spare key is under the blue pot."}}])
        + "\n# End commands"
    )
    agent = make_agent(
        tmp_path,
        FakeLLM("fake", responses=lambda p: answer if "[note " in p else "A thought."),
    )
    with agent.services.db.unit() as repos:
        people = managers_over(repos).people
        people.add_identity(people.owner().id, "matrix", accounts["ada"])
        eve = people.add("Eve", role="guest")
        people.add_identity(eve.id, "matrix", accounts["eve"])
    runner = ChannelRunner(agent.services.db, matrix_settings(synapse.url, accounts["anima"])).start()
    try:

        async def a_shared_room() -> str:
            async with MatrixHuman(synapse.url, accounts["ada"], "ada-pw") as ada:
                room = await ada.room_with(accounts["anima"], accounts["eve"])
                async with MatrixHuman(synapse.url, accounts["eve"], "eve-pw") as eve_client:
                    await eve_client.join(room)
                await ada.wait_member(room, accounts["anima"])
                await ada.wait_member(room, accounts["eve"])
                await ada.say(room, "Where did we leave the spare key? The marble owl knows.")
                return room

        shared = asyncio.run(asyncio.wait_for(a_shared_room(), 90))

        def noted() -> bool:
            return any("marble owl" in n.text for n in notes_of(agent))

        run_deadline(noted, "the owner's message as a note")
        [note] = [n for n in notes_of(agent) if "marble owl" in n.text]
        assert note.door == "matrix"
        assert "User: Where did we leave the spare key? The marble owl knows." in search(agent, "marble owl")
        state = agent.tick()
        assert state["audience"]["role"] == "owner"

        def sent() -> bool:
            with agent.services.db.unit() as repos:
                rows = managers_over(repos).channels.outbox()
                return any(r.state == "sent" and "spare key" in r.text for r in rows)

        run_deadline(sent, "the answer sent")

        async def where_it_went() -> tuple[list[str], list[str]]:
            async with MatrixHuman(synapse.url, accounts["ada"], "ada-pw") as ada:
                assert ada.client is not None
                await ada.client.sync(timeout=1000)
                invited = list(ada.client.invited_rooms)
                for room_id in invited:
                    await ada.join(room_id)
                await ada.client.sync(timeout=1000)
                in_shared = [e["content"]["body"] for e in await ada.messages_from(shared, accounts["anima"])]
                direct = []
                for room_id in set(ada.client.rooms) | set(invited):
                    if room_id != shared:
                        direct += [e["content"]["body"] for e in await ada.messages_from(room_id, accounts["anima"])]
                return in_shared, direct

        in_shared, direct = asyncio.run(asyncio.wait_for(where_it_went(), 60))
        assert in_shared == []  # never where the guest reads
        assert direct == ["Private: the spare key is under the blue pot."]
    finally:
        runner.stop()
        agent.services.db.close()


def run_deadline(check: Any, what: str, limit_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {limit_s:.0f} s")
        time.sleep(0.2)
