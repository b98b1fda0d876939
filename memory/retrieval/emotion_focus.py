"""Concentration by emotions with thresholds: a focus such as `тревожность:≥2`, `anxiety:>=2`, `joy:<3` or a
bare `anxiety` (felt at any strength) matched against what was felt, stored as `name:strength` strings (a
strength left out counts as 1). Several emotions combine with and/or logic."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "≥": operator.ge,
    ">=": operator.ge,
    ">": operator.gt,
    "≤": operator.le,
    "<=": operator.le,
    "<": operator.lt,
    "=": operator.eq,
    "==": operator.eq,
}
_FOCUS = re.compile(
    r"^\s*(?P<name>[^:<>=≥≤]+?)\s*(?::\s*|(?=[<>=≥≤]))(?P<op>≥|≤|>=|<=|==|=|>|<)?\s*(?P<value>-?\d+(?:\.\d+)?)\s*$"
)


class EmotionFocus(NamedTuple):
    name: str
    op: str | None  # None: felt at any strength
    value: float

    def holds(self, felt: dict[str, float]) -> bool:
        if self.name not in felt:
            return False
        return self.op is None or COMPARISONS[self.op](felt[self.name], self.value)


def parse_focus(text: str) -> EmotionFocus:
    """`anxiety` → felt at all; `anxiety:≥2` / `anxiety>=2` / `anxiety:2` (at least 2) → with a threshold."""
    match = _FOCUS.match(str(text))
    if match is None:
        return EmotionFocus(str(text).split(":")[0].strip().lower(), None, 0.0)
    return EmotionFocus(match["name"].strip().lower(), match["op"] or "≥", float(match["value"]))


def felt_strengths(emotions: Iterable[Any]) -> dict[str, float]:
    """`["anxiety:4", "Joy"]` → {"anxiety": 4.0, "joy": 1.0} (the strongest when one is named twice)."""
    felt: dict[str, float] = {}
    for raw in emotions or []:
        name, _, strength = str(raw).partition(":")
        try:
            value = float(strength.strip()) if strength.strip() else 1.0
        except ValueError:
            value = 1.0
        key = name.strip().lower()
        felt[key] = max(value, felt.get(key, value))
    return felt


def emotions_match(wanted: Iterable[str], felt: Iterable[Any], logic: str = "or") -> bool:
    """Whether what was felt meets every (logic "and") or any (logic "or") of the wanted emotions' thresholds."""
    foci = [parse_focus(w) for w in wanted]
    strengths = felt_strengths(felt)
    checks = (focus.holds(strengths) for focus in foci)
    return all(checks) if logic == "and" else any(checks)
