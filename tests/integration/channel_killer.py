"""A persona's channel runner in its own process that SIGKILLs itself at one exact point of sending — the crash the
outbox must survive. The point is chosen by patching a library or channel function here, in the test harness (the
product has no hook for it):

- `before_smtp`: the outbox committed `sending`, the SMTP transaction not begun;
- `after_250`: the SMTP server answered 250, the outbox has not recorded it;
- `before_copy`: the outbox recorded `sent`, the copy for the Sent folder not appended;
- `after_telegram_send`: the Bot API answered sendMessage, the outbox has not recorded it.

Each message is killed at once: the kill comes the first time a message (by its Message-ID, or its idempotency key)
reaches the point, remembered in DATA_DIR/killed-at, so a restarted runner finishes a message its predecessor was
killed on and dies on the next (bench/channels.py).

    python -m tests.integration.channel_killer DATA_DIR POINT ENTRY_JSON   (secrets from the entry's secret_env)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from channels.runner import ChannelRunner
from memory import Database
from persona.settings import ChannelEntry, ChannelsSettings, Settings


def reached(ledger: Path, message: str) -> None:
    """SIGKILL, unless `message` was killed at this point before."""
    done = ledger.read_text().split() if ledger.exists() else []
    if message in done:
        return
    with ledger.open("a") as out:
        out.write(f"{message}\n")
        out.flush()
        os.fsync(out.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def message_id(raw: bytes) -> str:
    found = re.search(rb"^Message-ID:\s*(<[^>\s]+>)", raw, re.IGNORECASE | re.MULTILINE)
    return found.group(1).decode() if found else "?"


def arm(point: str, ledger: Path) -> None:
    import aiosmtplib

    from channels.email import EmailChannel
    from channels.telegram import TelegramChannel

    real_smtp = aiosmtplib.send
    if point in ("before_smtp", "after_250"):

        async def smtp(mail: Any, *args: Any, **kwargs: Any) -> Any:
            if point == "before_smtp":
                reached(ledger, str(mail["Message-ID"]))
            answer = await real_smtp(mail, *args, **kwargs)
            if point == "after_250":
                reached(ledger, str(mail["Message-ID"]))
            return answer

        aiosmtplib.send = smtp
    elif point == "before_copy":
        real_append = EmailChannel._append_sent

        def append(self: EmailChannel, raw: bytes) -> None:
            reached(ledger, message_id(raw))
            real_append(self, raw)

        EmailChannel._append_sent = append  # type: ignore[method-assign]
    elif point == "after_telegram_send":
        real_send = TelegramChannel.send

        async def send(self: TelegramChannel, message: Any) -> str:
            sent = await real_send(self, message)
            reached(ledger, message.idempotency_key)
            return sent

        TelegramChannel.send = send  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {point!r}")


def main() -> None:
    data_dir, point, entry = sys.argv[1], sys.argv[2], ChannelEntry(**json.loads(sys.argv[3]))
    arm(point, Path(data_dir) / "killed-at")
    settings = Settings(
        user_name="Ann",
        timezone="UTC",
        channels=ChannelsSettings(entries=[entry], poll_wait_s=1, backoff_initial_s=0.1),
    )
    db = Database.open(data_dir)
    asyncio.run(asyncio.wait_for(ChannelRunner(db, settings).run(), 90))  # the kill ends it long before


if __name__ == "__main__":
    main()
