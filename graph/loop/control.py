"""Start, pause and stop from outside the loop: the web app (or any process on the same database) writes the
wanted state; the loop reads it between ticks. The loop records its own state beside it, for the Controls page."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any, Literal

from memory import Repos

CONTROL_KEY = "run/control"  # {"want": running|paused|stopped, "by", "at"}: what the human asked for
STATUS_KEY = "run/status"  # {"state": running|paused|idle|stopped, "pid", "thread", "tick", "at"}: what the loop does
Wanted = Literal["running", "paused", "stopped"]


def wanted(repos: Repos) -> Wanted:
    want: Wanted = (repos.config.get(CONTROL_KEY) or {}).get("want", "running")
    return want


def request(repos: Repos, want: Wanted, *, by: str, now: datetime) -> dict[str, Any]:
    value = {"want": want, "by": by, "at": now.isoformat()}
    repos.config.set(CONTROL_KEY, value)
    return value


def record_status(repos: Repos, state: str, *, now: datetime, thread: str, tick: int | None = None,
                  pid: int | None = None) -> None:
    repos.config.set(STATUS_KEY, {"state": state, "thread": thread, "tick": tick, "pid": pid,
                                  "host": socket.gethostname(), "at": now.isoformat()})


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
    return {"control": repos.config.get(CONTROL_KEY) or {"want": "running"}, "loop": repos.config.get(STATUS_KEY) or {}}
