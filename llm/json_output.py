"""The one lenient reader for JSON a model wrote: commands blocks, tool calls, structured answers, reflex ratings.

Models wrap JSON in code fences and prose, cut it off at max_tokens, leave trailing commas or single quotes.
`read_json` returns the value json-repair makes of it and says whether anything had to be repaired (prose
around a clean value is not a repair). Text that holds no JSON, or JSON nested too deep to read, is an error
string — never an exception.

What it returns is safe to keep anywhere (state, checkpoints, SQL): nested at most `MAX_DEPTH` levels, and integers
beyond JSON's interoperable range (±2^53, RFC 8259 §6) read as floats — a checkpoint serializer refuses integers
past 64 bits, and an answer that bricked every resume once is reason enough not to pass them on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import json_repair

# json-repair logs these when it skips prose around a value; they are not repairs of the JSON itself
_BENIGN = ("The parser returned early", "There were no more elements")
MAX_DEPTH = 32
MAX_SAFE_INT = 2**53


@dataclass
class JsonReading:
    value: Any = None
    repaired: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def read_json(text: str | None) -> JsonReading:
    """The first JSON value in `text`, repaired where needed."""
    text = (text or "").strip()
    if not text:
        return JsonReading(error="empty")
    reading = _read(text)
    if reading.ok:
        problem = bound(reading.value)
        if problem:
            return JsonReading(error=problem)
    return reading


def bound(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Make a parsed JSON value safe to keep, in place: integers past ±2^53 become floats. Returns what makes it
    unkeepable (nesting deeper than `max_depth`), or None. Iterative: any depth is walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return f"JSON nested deeper than {max_depth} levels"
        keys = node.keys() if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else ()
        for key in keys:
            item = node[key]
            if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_SAFE_INT:
                if item.bit_length() > 1000:  # past the largest float
                    return "a number in the JSON is too large to keep"
                node[key] = float(item)
            elif isinstance(item, (dict, list)):
                stack.append((item, depth + 1))
    return None


def _read(text: str) -> JsonReading:
    try:
        return JsonReading(json.loads(text))
    except RecursionError:
        return JsonReading(error="JSON nested too deeply to read")
    except ValueError:
        pass
    if "{" not in text and "[" not in text:
        return JsonReading(error=f"no JSON in {text[:80]!r}")
    try:
        value, log = json_repair.repair_json(text, return_objects=True, logging=True)
    except RecursionError:
        return JsonReading(error="JSON nested too deeply to read")
    except Exception as exc:  # json-repair raises on pathological input
        return JsonReading(error=f"unparseable JSON ({type(exc).__name__}): {text[:80]!r}")
    if value in ("", None) or (isinstance(value, str) and not text.lstrip().startswith('"')):
        return JsonReading(error=f"unparseable JSON: {text[:80]!r}")
    repaired = any(not str(entry.get("text", "")).startswith(_BENIGN) for entry in log)
    return JsonReading(value, repaired)


def json_object(text: str | None) -> dict[str, Any]:
    """A model's JSON answer as a dict (a cut-off answer keeps its complete fields); {} when it is not one."""
    value = read_json(text).value
    return value if isinstance(value, dict) else {}
