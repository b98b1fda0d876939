"""A persona's channel runner in its own process, killed (SIGKILL) right after Matrix accepted a message and before
the outbox recorded it — the crash the outbox must survive without losing or doubling the message.

    python -m tests.integration.matrix_sender DATA_DIR HOMESERVER USER_ID   (the password in MATRIX_TEST_PASSWORD)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from channels.base import Channel, Outgoing
from channels.kinds import build_channel
from channels.runner import ChannelRunner
from memory import Database
from persona.settings import ChannelEntry, ChannelsSettings, Settings


def matrix_settings(homeserver: str, user_id: str, *, poll_wait_s: float = 1.0) -> Settings:
    entry = ChannelEntry(
        kind="matrix",
        name="matrix",
        options={"homeserver": homeserver, "user_id": user_id},
        secret_env={"password": "MATRIX_TEST_PASSWORD"},
    )
    return Settings(
        user_name="Ada",
        timezone="UTC",
        channels=ChannelsSettings(entries=[entry], poll_wait_s=poll_wait_s, backoff_initial_s=0.2),
    )


def killed_after_send(entry: ChannelEntry) -> Channel:
    """The real Matrix channel, whose process dies the moment Matrix has accepted a message (before the outbox can
    record it)."""
    channel = build_channel(entry)
    send = channel.send

    async def send_then_die(message: Outgoing) -> str:
        platform_id = await send(message)
        os.kill(os.getpid(), signal.SIGKILL)
        return platform_id

    channel.send = send_then_die  # type: ignore[method-assign]
    return channel


def main() -> None:
    data_dir, homeserver, user_id = sys.argv[1:4]
    db = Database.open(data_dir)
    runner = ChannelRunner(db, matrix_settings(homeserver, user_id), factory=killed_after_send)
    asyncio.run(asyncio.wait_for(runner.run(), 120))


if __name__ == "__main__":
    main()
