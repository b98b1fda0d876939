"""Reading what arrives from the mesh, bounded: its size and its nesting are checked before the JSON parser runs, so
no message — a 60 KB array nested 30,000 deep, a NaN, bytes that are not UTF-8 — can reach a recursion limit, a
serializer or a database column. `read` returns the parsed value or raises `WireError(reason, detail)`.

Python's json module recurses once per level and raises RecursionError past ~1,000 levels (after walking the whole
input); no maintained library bounds the depth at a chosen level, so the bound is one linear scan over the bytes
that can change the depth (brackets, quotes, backslashes) before parsing."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 16  # a container nests at most 6 (an envelope's payload → its note → its payload → a list); sync
# messages 9
_STRUCTURAL = re.compile(rb'[\[\]{}"\\]')


class WireError(ValueError):
    """What arrived cannot be read; `reason` is the refusal counter it goes to (oversized, malformed)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def depth(data: bytes) -> int:
    """How deep the JSON in `data` nests (brackets inside strings do not count); linear, no recursion."""
    deepest = level = 0
    in_string = False
    escaped_at = -1  # the position of a character a backslash escapes
    for match in _STRUCTURAL.finditer(data):
        at = match.start()
        if at == escaped_at:
            continue
        char = data[at]
        if in_string:
            if char == 0x5C:  # backslash: the next byte is escaped
                escaped_at = at + 1
            elif char == 0x22:
                in_string = False
        elif char == 0x22:
            in_string = True
        elif char in (0x5B, 0x7B):
            level += 1
            deepest = max(deepest, level)
        elif char in (0x5D, 0x7D):
            level -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def read(raw: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `raw`, or WireError: oversized (more than `max_bytes`), malformed (not UTF-8, not JSON,
    nested deeper than `max_depth`, NaN or Infinity)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise WireError("oversized", f"{len(data)} bytes > {max_bytes}")
    nested = depth(data)
    if nested > max_depth:
        raise WireError("malformed", f"nested {nested} deep (at most {max_depth})")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise WireError("malformed", f"not JSON ({str(exc)[:120]})") from None


__all__ = ["MAX_DEPTH", "WireError", "depth", "read"]
