"""The one time helper: what time it is (UTC), and a stored time read back as UTC.

Every time the house keeps is UTC. SQLite hands back naive datetimes, so a time read from a row goes through
`as_utc` before it is compared with an aware one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def utcnow() -> datetime:
    return datetime.now(UTC)


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """`value` with its zone: a naive time (SQLite's) is UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


__all__ = ["as_utc", "utcnow"]
