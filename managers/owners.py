"""Process ownership: which process runs a thread, a session or a background run (its token: host, pid and the
pid's start time), and whether that process is still alive — so what a killed process left running is recognised and
taken over, never what a live one (here or on another machine) still runs."""

from __future__ import annotations

import os
import socket
from functools import cache


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@cache
def _token_for(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def process_token() -> str:
    """This process's token."""
    return _token_for(os.getpid())


def owner_alive(token: str | None) -> bool:
    """False when the owning process is gone (or its pid now belongs to another process)."""
    if not token:
        return False
    host, _, rest = token.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's process: not ours to judge
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    current = _start_time(pid)
    return current is None or started in ("?", current)
