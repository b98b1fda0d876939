"""The Telegram channel — python-telegram-bot itself, pointed by `api_url` at a stand-in Bot API server
(tests/integration/telegram_bot_api.py, its own process: the real Bot API cannot be reached from here; this is the
one channel tested against a stand-in). Long polling with offsets, text in and out, replies, a voice note in
(getFile + download) and a spoken answer out (sendVoice; a WAV as a file), flood control as ChannelDown. Every wait
is bounded."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import urllib.request
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import pytest

from channels.base import Batch, ChannelDown, ChannelRefused, Outgoing
from channels.telegram import TelegramChannel, parse_options
from tests.fakes.managers import managers_over
from tests.integration import telegram_bot_api

TOKEN = "123456:stand-in-token"
ANN = {"id": 777, "first_name": "Ann", "last_name": "Lee", "username": "ann"}
VOICE = b"OggS" + bytes(range(256)) * 4


@pytest.fixture(scope="module")
def bot_api() -> Iterator[str]:
    with telegram_bot_api.serving(TOKEN) as base:
        yield base


def control(base: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        f"{base}/_test/{path}",
        method="POST" if body is not None else "GET",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def channel_for(base: str, token: str = TOKEN) -> TelegramChannel:
    return TelegramChannel(
        "telegram",
        parse_options("telegram", {"api_url": base, "timeout_s": "10"}),
        lambda: token,
        max_attachment_bytes=100_000,
    )


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_messages_in_and_out_with_a_voice_note_both_ways(bot_api: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    control(bot_api, "message", {"chat_id": 777, "user": ANN, "text": "Hello, Anima"})

    async def scenario() -> tuple[Batch, Batch, Batch, Batch, str, str, bytes, str | None]:
        channel = channel_for(bot_api)
        await channel.open()
        try:
            first = await channel.fetch(None, wait_s=5)
            # a voice note arrives while the bot long-polls
            waiting = asyncio.create_task(channel.fetch(first.cursor, wait_s=10))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(
                control,
                bot_api,
                "message",
                {"chat_id": 777, "user": ANN, "voice": base64.b64encode(VOICE).decode(), "reply_to": 1},
            )
            second = await waiting
            rewound = await channel.fetch(first.cursor, wait_s=0)  # the cursor was not stored: same updates again
            quiet = await channel.fetch(second.cursor, wait_s=1)
            voice = second.messages[0].attachments[0]
            heard = await channel.download(voice, max_bytes=100_000)
            text_id = await channel.send(
                Outgoing(
                    idempotency_key="k1",
                    recipient="777",
                    text="Hello, Ann!",
                    conversation="777",
                    reply_to=first.messages[0].platform_id,
                )
            )
            spoken_id = await channel.send(
                Outgoing(idempotency_key="k2", recipient="777", text="", audio=b"OggS-spoken-answer")
            )
            await channel.send(Outgoing(idempotency_key="k2w", recipient="777", text="", audio=b"RIFF-a-wav"))
            return (
                first,
                second,
                rewound,
                quiet,
                text_id,
                spoken_id,
                heard,
                await channel.already_sent(Outgoing(idempotency_key="k1", recipient="777", text="Hello, Ann!")),
            )
        finally:
            await channel.close()

    first, second, rewound, quiet, text_id, spoken_id, heard, already = run(scenario())

    [hello] = first.messages
    assert (hello.channel, hello.platform_id, hello.sender, hello.sender_name) == (
        "telegram",
        "777:1",
        "777",
        "Ann Lee",
    )
    assert (hello.conversation, hello.text, hello.reply_to, hello.extra["username"]) == (
        "777",
        "Hello, Anima",
        None,
        "ann",
    )
    assert first.cursor == "1001"

    [spoken] = second.messages
    assert spoken.platform_id == "777:2" and spoken.reply_to == "777:1" and spoken.text == ""
    [voice] = spoken.attachments
    assert (voice.kind, voice.mime, voice.size) == ("audio", "audio/ogg", len(VOICE))
    assert heard == VOICE
    assert second.cursor == "1002"
    assert [m.platform_id for m in rewound.messages] == ["777:2"] and rewound.cursor == "1002"
    assert quiet.messages == () and quiet.cursor == "1002"

    sent = control(bot_api, "sent")
    text_sent, voice_sent, wav_sent = sent[-3], sent[-2], sent[-1]
    assert (wav_sent["method"], wav_sent["document_bytes"]) == ("sendDocument", len(b"RIFF-a-wav"))
    assert (text_sent["method"], text_sent["chat"]["id"], text_sent["text"]) == ("sendMessage", 777, "Hello, Ann!")
    assert text_sent["reply_to_message_id"] == 1
    assert text_id == f"777:{text_sent['message_id']}"
    assert (voice_sent["method"], voice_sent["voice_bytes"]) == ("sendVoice", len(b"OggS-spoken-answer"))
    assert voice_sent["voice_sha256"] == hashlib.sha256(b"OggS-spoken-answer").hexdigest()
    assert spoken_id == f"777:{voice_sent['message_id']}"
    assert already is None  # the Bot API cannot tell; the outbox's record is all there is
    assert "getUpdates" in caplog.text and TOKEN.split(":")[1] not in caplog.text  # URLs logged, the token never


def test_a_text_document_is_a_text_attachment_fetched_within_the_cap(bot_api: str) -> None:
    async def scenario() -> tuple[Batch, bytes, Exception | None]:
        channel = channel_for(bot_api)
        await channel.open()
        try:
            start = await channel.fetch(None, wait_s=0)  # whatever the other test left
            await asyncio.to_thread(
                control,
                bot_api,
                "message",
                {
                    "chat_id": 888,
                    "user": {"id": 888, "first_name": "Bo"},
                    "caption": "my notes",
                    "document": base64.b64encode(b"line one\nline two").decode(),
                    "file_name": "notes.txt",
                },
            )
            batch = await channel.fetch(start.cursor, wait_s=5)
            document = batch.messages[0].attachments[0]
            data = await channel.download(document, max_bytes=1000)
            try:
                await channel.download(document, max_bytes=5)
                refused = None
            except ChannelRefused as exc:
                refused = exc
            return batch, data, refused
        finally:
            await channel.close()

    batch, data, refused = run(scenario())
    [message] = batch.messages
    assert message.text == "my notes" and message.sender_name == "Bo"
    [document] = message.attachments
    assert (document.kind, document.name, document.mime, document.size) == ("text", "notes.txt", "text/plain", 17)
    assert data == b"line one\nline two"
    assert refused is not None


def test_flood_control_and_a_wrong_token_are_channel_down_an_unknown_chat_refused(bot_api: str) -> None:
    async def flooded() -> ChannelDown:
        channel = channel_for(bot_api)
        await channel.open()
        try:
            await asyncio.to_thread(control, bot_api, "flood", {})
            with pytest.raises(ChannelDown) as caught:
                await channel.send(Outgoing(idempotency_key="k3", recipient="777", text="too fast"))
            return caught.value
        finally:
            await channel.close()

    assert run(flooded()).retry_after_s == 3

    async def unknown_chat() -> None:
        channel = channel_for(bot_api)
        await channel.open()
        try:
            await channel.send(Outgoing(idempotency_key="k4", recipient=str(telegram_bot_api.UNKNOWN_CHAT), text="hi"))
        finally:
            await channel.close()

    with pytest.raises(ChannelRefused, match="(?i)chat not found"):
        run(unknown_chat())

    with pytest.raises(ChannelDown):
        run(channel_for(bot_api, token="999:wrong").open())


def test_a_kill_after_the_bot_api_accepted_resends_and_the_outbox_shows_the_possible_duplicate(
    bot_api: str, tmp_path, monkeypatch
) -> None:
    """The Bot API keeps no idempotency key and shows a bot no history of its own messages: a runner SIGKILLed right
    after sendMessage answered (tests/integration/channel_killer.py) sends that answer again on restart —
    at-least-once, as docs/channels.md says — and the row says so: attempts 2, `possible duplicate`, one key."""
    import json
    import os
    import signal
    import subprocess
    import sys
    from collections import Counter
    from datetime import datetime

    from channels.runner import ChannelRunner
    from memory import Database
    from persona.settings import ChannelEntry, ChannelsSettings, Settings
    from tests.integration.servers import ROOT
    from tests.integration.test_channels_runner_email_telegram import run_until

    monkeypatch.setenv("TG_KILL_TEST_TOKEN", TOKEN)
    entry = ChannelEntry(
        kind="telegram",
        name="telegram",
        options={"api_url": bot_api, "timeout_s": "10"},
        secret_env={"token": "TG_KILL_TEST_TOKEN"},
    )
    data = tmp_path / "data"
    db = Database.open(data)
    with db.unit() as repos:
        m = managers_over(repos)
        owner = m.people.owner()
        m.people.add_identity(owner.id, "telegram", str(ANN["id"]))
        owner = m.people.update(owner.id, preferred_channel="telegram")
        texts = [f"kill test {n}: {os.urandom(4).hex()}" for n in range(2)]
        keys = [m.channels.send(owner, text, now=datetime.now(UTC)).idempotency_key for text in texts]
    db.close()
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.channel_killer",
            str(data),
            "after_telegram_send",
            json.dumps(entry.model_dump()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    db = Database.open(data)
    settings = Settings(
        user_name="Ann",
        timezone="UTC",
        channels=ChannelsSettings(entries=[entry], poll_wait_s=1, backoff_initial_s=0.1),
    )

    def all_sent() -> bool:
        with db.unit() as repos:
            return all(repos.channels.by_key(key).state == "sent" for key in keys)

    run_until(ChannelRunner(db, settings), all_sent)
    delivered = Counter(s["text"] for s in control(bot_api, "sent") if s["method"] == "sendMessage")
    assert [delivered[text] for text in texts] == [2, 1]
    with db.unit() as repos:
        first, second = (repos.channels.by_key(key) for key in keys)
        assert (first.state, first.attempts, (first.last_error or "").startswith("possible duplicate")) == (
            "sent",
            2,
            True,
        )
        assert (second.attempts, second.last_error) == (1, None)
    db.close()
