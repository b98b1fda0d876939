"""The live stream: events the loop journals (graph/loop/journal.py), read by cursor for Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from managers import ManagerFactory
from managers.audience import OWNER
from memory.clock import as_utc

if TYPE_CHECKING:
    from managers.journal import LiveEventView

log = logging.getLogger(__name__)
POLL_S = 0.1  # one indexed query per client per poll; an event reaches the page within ~0.1 s plus the loop's flush
KEEPALIVE_S = 15.0


def event_dict(row: LiveEventView) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": as_utc(row.at).isoformat() if row.at else None,
        "thread_id": row.thread_id,
        "tick": row.tick,
        "kind": row.kind,
        "node": row.node,
        "data": row.data,
    }


def newest_id(managers: ManagerFactory) -> int:
    with managers.unit(OWNER) as house:
        return house.journal.newest_event_id()


def read_after(
    managers: ManagerFactory, cursor: int, kinds: Iterable[str] | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    with managers.unit(OWNER) as house:
        return [event_dict(row) for row in house.journal.events_after(cursor, limit, kinds)]


class JournalListener:
    """Over a deployment: one LISTEN connection for the web process. A worker's journal NOTIFYs the persona's schema
    when it writes; every stream of that persona wakes at once instead of polling its table."""

    RETRY_S = 2.0

    def __init__(self, conninfo: str):
        self.conninfo = conninfo
        self._subscribers: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, schema: str) -> asyncio.Event:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen())
        event = asyncio.Event()
        self._subscribers.setdefault(schema, set()).add(event)
        return event

    def unsubscribe(self, schema: str, event: asyncio.Event) -> None:
        self._subscribers.get(schema, set()).discard(event)

    async def _listen(self) -> None:
        from managers.journal import journal_notifications

        while True:
            try:
                async for schema in journal_notifications(self.conninfo):
                    for event in list(self._subscribers.get(schema, ())):
                        event.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the database restarts: listen again (streams poll meanwhile)
                log.warning("live journal: LISTEN lost; listening again", exc_info=True)
                await asyncio.sleep(self.RETRY_S)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


LISTENED_POLL_S = (
    2.0  # with a listener, the table is read again at least this often (a NOTIFY missed while reconnecting)
)


async def follow(
    managers: ManagerFactory,
    cursor: int,
    *,
    kinds: Iterable[str] | None = None,
    is_disconnected: Callable[[], Any] | None = None,
    listener: JournalListener | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Events after `cursor` as they are journaled, forever (until the client goes): read when PostgreSQL says the
    journal grew (`listener`), or by polling the table."""
    kinds = list(kinds or [])
    idle = 0.0
    schema = getattr(managers.db, "schema", None) or "public"
    woken = listener.subscribe(schema) if listener is not None else None
    try:
        while True:
            if is_disconnected is not None and await is_disconnected():
                return
            if woken is not None:
                woken.clear()
            rows = await asyncio.to_thread(read_after, managers, cursor, kinds)
            for row in rows:
                cursor = row["id"]
                yield row
            if rows:
                idle = 0.0
                continue
            started = asyncio.get_running_loop().time()
            if woken is None:
                await asyncio.sleep(POLL_S)
            else:
                try:
                    await asyncio.wait_for(woken.wait(), LISTENED_POLL_S)
                except TimeoutError:
                    pass
            idle += asyncio.get_running_loop().time() - started
            if idle >= KEEPALIVE_S:
                idle = 0.0
                yield {"id": cursor, "kind": "keepalive"}
    finally:
        if listener is not None and woken is not None:
            listener.unsubscribe(schema, woken)


def sse_json(event: dict[str, Any]) -> dict[str, Any]:
    """An event as sse-starlette's dict: `event` is the kind, `id` the cursor (Last-Event-ID resumes after it)."""
    return {"event": event["kind"], "id": str(event["id"]), "data": json.dumps(event, ensure_ascii=False, default=str)}
