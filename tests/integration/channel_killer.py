"""A persona's channel runner in its own process that SIGKILLs itself at one exact point of sending — the crash the
outbox must survive. The point is chosen by patching a library or channel function here, in the test harness (the
product has no hook for it):

- `before_smtp`: the outbox committed `sending`, the SMTP transaction not begun;
- `after_250`: the SMTP server answered 250, the outbox has not recorded it;
- `before_copy`: the outbox recorded `sent`, the copy for the Sent folder not appended;
- `after_telegram_send`: the Bot API answered sendMessage, the outbox has not recorded it.

    python -m tests.integration.channel_killer DATA_DIR POINT ENTRY_JSON   (secrets from the entry's secret_env)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from channels.runner import ChannelRunner
from memory import Database
from persona.settings import ChannelEntry, ChannelsSettings, Settings


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str) -> None:
    import aiosmtplib

    from channels.email import EmailChannel
    from channels.telegram import TelegramChannel

    real_smtp: Callable[..., Any] = aiosmtplib.send
    if point == "before_smtp":
        async def smtp(*args: Any, **kwargs: Any) -> Any:
            die()
        aiosmtplib.send = smtp
    elif point == "after_250":
        async def smtp(*args: Any, **kwargs: Any) -> Any:
            answer = await real_smtp(*args, **kwargs)
            die()
            return answer
        aiosmtplib.send = smtp
    elif point == "before_copy":
        EmailChannel._append_sent = lambda self, raw: die()  # type: ignore[method-assign]
    elif point == "after_telegram_send":
        real_send = TelegramChannel.send

        async def send(self: TelegramChannel, message: Any) -> str:
            sent = await real_send(self, message)
            die()
            return sent
        TelegramChannel.send = send  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {point!r}")


def main() -> None:
    data_dir, point, entry = sys.argv[1], sys.argv[2], ChannelEntry(**json.loads(sys.argv[3]))
    arm(point)
    settings = Settings(user_name="Ann", timezone="UTC",
                        channels=ChannelsSettings(entries=[entry], poll_wait_s=1, backoff_initial_s=0.1))
    db = Database.open(data_dir)
    asyncio.run(asyncio.wait_for(ChannelRunner(db, settings).run(), 90))  # the kill ends it long before


if __name__ == "__main__":
    main()
