"""The live stream: events the loop journals (graph/loop/journal.py), read by cursor for Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from memory import Database

POLL_S = 0.1  # one indexed query per client per poll; an event reaches the page within ~0.1 s plus the loop's flush
KEEPALIVE_S = 15.0


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)  # SQLite drops the zone


def event_dict(row) -> dict[str, Any]:
    return {"id": row.id, "at": _utc(row.at).isoformat() if row.at else None, "thread_id": row.thread_id, "tick": row.tick,
            "kind": row.kind, "node": row.node, "data": row.data}


def newest_id(db: Database) -> int:
    with db.unit() as repos:
        return repos.live_events.newest_id()


def read_after(db: Database, cursor: int, kinds: Iterable[str] | None = None, limit: int = 200) -> list[dict[str, Any]]:
    with db.unit() as repos:
        return [event_dict(row) for row in repos.live_events.after(cursor, limit, kinds)]


async def follow(db: Database, cursor: int, *, kinds: Iterable[str] | None = None,
                 is_disconnected: Callable[[], Any] | None = None) -> AsyncIterator[dict[str, Any]]:
    """Events after `cursor` as they are journaled, forever (until the client goes)."""
    kinds = list(kinds or [])
    idle = 0.0
    while True:
        if is_disconnected is not None and await is_disconnected():
            return
        rows = await asyncio.to_thread(read_after, db, cursor, kinds)
        for row in rows:
            cursor = row["id"]
            yield row
        if rows:
            idle = 0.0
            continue
        await asyncio.sleep(POLL_S)
        idle += POLL_S
        if idle >= KEEPALIVE_S:
            idle = 0.0
            yield {"id": cursor, "kind": "keepalive"}


def sse_json(event: dict[str, Any]) -> dict[str, Any]:
    """An event as sse-starlette's dict: `event` is the kind, `id` the cursor (Last-Event-ID resumes after it)."""
    return {"event": event["kind"], "id": str(event["id"]), "data": json.dumps(event, ensure_ascii=False, default=str)}
