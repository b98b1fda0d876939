"""What templates and expressions see: the playbook variables by name, plus `state`, `vars`, `persona`."""

from __future__ import annotations

from typing import Any

from nodes.state import STATE_FIELDS, TickState, state_values

RESERVED_NAMES = {"state", "vars", "persona", "history"}


def namespace(state: TickState, persona_name: str = "") -> dict[str, Any]:
    variables = dict(state.vars)
    values = state_values(state)
    values.pop("vars")
    return {"state": values, "vars": variables, "persona": persona_name, **variables}


def lookup(state: TickState | dict[str, Any], dotted: str) -> Any:
    """A dot path into the state (`novelty.stagnation_flag`) or, when its first part is not a state
    field, into the variables (`plan.done`); list items by number (`tasks.0`)."""
    parts = dotted.split(".")
    variables = state.get("vars") if isinstance(state, dict) else state.vars
    value: Any = state if parts[0] in STATE_FIELDS else (variables or {})
    for part in parts:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        else:
            value = getattr(value, part, None)
    return value
