"""Async clients (MCP) called from the synchronous tick: the coroutine runs on its own event loop in a worker
thread, so it works whether or not the calling thread already runs a loop (langgraph dev, the web server)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class ReachTimeout(TimeoutError):
    pass


def run_with_timeout(make: Callable[[], Awaitable[T]], timeout_s: float, what: str) -> T:
    """Run `make()` to completion within `timeout_s` (then it is cancelled: a stdio server is stopped, a connection
    closed) and return its result; ReachTimeout names `what` when time ran out."""

    async def bounded() -> T:
        try:
            return await asyncio.wait_for(make(), timeout_s)
        except TimeoutError:
            raise ReachTimeout(f"{what}: no answer within {timeout_s:g} s") from None

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="anima-reach") as pool:
        return pool.submit(asyncio.run, bounded()).result()
