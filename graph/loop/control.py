"""Start, pause and stop from outside the loop: the web app (or any process on the same database) writes the
wanted state; the loop reads it between ticks. The loop records its own state beside it, for the Controls page."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any, Literal

from memory import Repos

Wanted = Literal["running", "paused", "stopped"]


def wanted(repos: Repos) -> Wanted:
    want: Wanted = (repos.config.loop_control or {}).get("want", "running")
    return want


def request(repos: Repos, want: Wanted, *, by: str, now: datetime) -> dict[str, Any]:
    value = {"want": want, "by": by, "at": now.isoformat()}
    repos.config.loop_control = value
    return value


def record_status(repos: Repos, state: str, *, now: datetime, thread: str, tick: int | None = None,
                  pid: int | None = None) -> None:
    repos.config.loop_status = {"state": state, "thread": thread, "tick": tick, "pid": pid,
                                 "host": socket.gethostname(), "at": now.isoformat()}


def loop_alive(loop: dict[str, Any]) -> bool | None:
    """Whether the process that last reported is still there (None: it runs on another machine, or never ran)."""
    pid = loop.get("pid")
    if not pid or loop.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status(repos: Repos) -> dict[str, Any]:
    return {"control": repos.config.loop_control or {"want": "running"}, "loop": repos.config.loop_status or {}}
