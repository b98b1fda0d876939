"""E-mail and Telegram through the channel runner (channels/runner.py) as configured in settings: a mail in the
owner's thread becomes a note by its author, the persona's answer queued in the outbox goes out over SMTP into
the owner's mailbox threaded to it; the same for a Telegram message and its answer through the stand-in Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from channels.runner import ChannelRunner
from tests.integration import mail_servers, telegram_bot_api
from tests.integration.test_email_channel import ANIMA, ANN, ann_mailbox, ann_sends
from tests.integration.test_telegram_channel import ANN as TG_ANN
from tests.integration.test_telegram_channel import TOKEN, control


pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


@pytest.fixture(scope="module")
def servers() -> Iterator[mail_servers.MailServers]:
    if mail_servers.missing():
        pytest.skip(str(mail_servers.missing()))
    with mail_servers.running() as running:
        yield running


@pytest.fixture(scope="module")
def bot_api() -> Iterator[str]:
    with telegram_bot_api.serving(TOKEN) as base:
        yield base


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Any]:
    from memory import Database

    database = Database.open(tmp_path)
    yield database
    database.close()


def settings_with(entry: Any) -> Any:
    from persona.settings import ChannelsSettings, Settings

    return Settings(user_name="Ada", timezone="UTC",
                    channels=ChannelsSettings(entries=[entry], poll_wait_s=1, backoff_initial_s=0.1))


def house(repos: Any, settings: Any) -> Any:
    from managers import ManagerDeps, Managers

    return Managers(repos, ManagerDeps(settings=settings, clock=lambda: datetime.now(timezone.utc)))


def run_until(runner: Any, done: Callable[[], bool], limit_s: float = 30.0) -> None:
    """The runner's own loop until `done()` (looked at between its steps) or the limit; then it stops."""

    async def main() -> None:
        task = asyncio.ensure_future(runner.run())
        deadline = asyncio.get_running_loop().time() + limit_s
        while asyncio.get_running_loop().time() < deadline and not done():
            await asyncio.sleep(0.1)
        runner._stop.set()
        await asyncio.wait_for(task, 20)

    asyncio.run(main())


def notes(db: Any) -> list[Any]:
    with db.unit() as repos:
        return list(repos.notes.list())


def outbox(db: Any, settings: Any) -> list[Any]:
    with db.unit() as repos:
        return list(house(repos, settings).channels.outbox())


def test_a_mail_becomes_a_note_and_the_answer_lands_threaded(servers, db, monkeypatch) -> None:
    from persona.settings import ChannelEntry

    monkeypatch.setenv("MAILTG_TEST_EMAIL_PASSWORD", mail_servers.USERS[ANIMA])
    entry = ChannelEntry(kind="email", name="email", secret_env={"password": "MAILTG_TEST_EMAIL_PASSWORD"}, options={
        "address": ANIMA, "imap_host": "127.0.0.1", "imap_port": str(servers.imap_port), "imap_tls": "none",
        "smtp_port": str(servers.smtp_port), "smtp_tls": "none", "poll_s": "0.2"})
    settings = settings_with(entry)
    with db.unit() as repos:
        m = house(repos, settings)
        owner = m.people.owner()
        m.people.add_identity(owner.id, "email", ANN)
    ann_sends(servers, "<runner-root@example.org>", "Plans", "What shall we do on Sunday?")

    runner = ChannelRunner(db, settings)
    run_until(runner, lambda: any("Sunday" in n.text for n in notes(db)))
    [note] = [n for n in notes(db) if "Sunday" in n.text]
    assert note.text == "What shall we do on Sunday?" and note.author_id == owner.id

    with db.unit() as repos:
        row = house(repos, settings).channels.send(owner, "A walk by the river.", now=datetime.now(timezone.utc))
        assert row is not None and row.conversation == "<runner-root@example.org>"
        row_id = row.id
    run_until(runner, lambda: any(r.id == row_id and r.state == "sent" for r in outbox(db, settings)))
    [sent] = [r for r in outbox(db, settings) if r.id == row_id]
    assert sent.state == "sent"
    [landed] = [mail for mail in ann_mailbox(servers) if mail["Message-ID"] == sent.platform_id]
    assert landed["Subject"] == "Re: Plans"
    assert "<runner-root@example.org>" in landed["References"]
    assert landed.get_content().strip() == "A walk by the river."


def test_a_telegram_message_becomes_a_note_and_the_answer_goes_to_the_chat(bot_api, db, monkeypatch) -> None:
    from persona.settings import ChannelEntry

    monkeypatch.setenv("MAILTG_TEST_TELEGRAM_TOKEN", TOKEN)
    entry = ChannelEntry(kind="telegram", name="telegram", options={"api_url": bot_api, "timeout_s": "10"},
                         secret_env={"token": "MAILTG_TEST_TELEGRAM_TOKEN"})
    settings = settings_with(entry)
    with db.unit() as repos:
        m = house(repos, settings)
        owner = m.people.owner()
        m.people.add_identity(owner.id, "telegram", str(TG_ANN["id"]))
    control(bot_api, "message", {"chat_id": TG_ANN["id"], "user": TG_ANN, "text": "Are you there?"})

    runner = ChannelRunner(db, settings)
    run_until(runner, lambda: any(n.text == "Are you there?" for n in notes(db)))
    [note] = [n for n in notes(db) if n.text == "Are you there?"]
    assert note.author_id == owner.id

    with db.unit() as repos:
        row = house(repos, settings).channels.send(owner, "Always.", now=datetime.now(timezone.utc))
        assert row is not None
        row_id = row.id
    run_until(runner, lambda: any(r.id == row_id and r.state == "sent" for r in outbox(db, settings)))
    [sent] = [r for r in outbox(db, settings) if r.id == row_id]
    delivered = [s for s in control(bot_api, "sent") if s["method"] == "sendMessage" and s["text"] == "Always."]
    assert len(delivered) == 1 and delivered[0]["chat"]["id"] == TG_ANN["id"]
    assert sent.platform_id == f"{TG_ANN['id']}:{delivered[0]['message_id']}"
