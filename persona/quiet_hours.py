"""Quiet hours: a local time window ("00:00-07:00", may wrap midnight) when the persona dreams and does not
write to its human unprompted."""

from __future__ import annotations

import re
from datetime import datetime, time, tzinfo


def parse_hours(spec: str) -> tuple[time, time]:
    """ "00:00-07:00" -> (00:00, 07:00); a window may wrap midnight ("22:30-06:00")."""
    match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", str(spec))
    if not match:
        raise ValueError(f"quiet hours must look like 00:00-07:00, not {spec!r}")
    h1, m1, h2, m2 = map(int, match.groups())
    if h1 > 23 or h2 > 24 or m1 > 59 or m2 > 59:
        raise ValueError(f"quiet hours {spec!r}: not a time of day")
    return time(h1, m1), time(min(h2, 23), m2 if h2 < 24 else 59)


def in_quiet_hours(now: datetime, zone: tzinfo, spec: str) -> bool:
    start, end = parse_hours(spec)
    local = now.astimezone(zone).time()
    if start == end:
        return False
    return start <= local < end if start < end else (local >= start or local < end)
