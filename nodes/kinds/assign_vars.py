"""Playbook `set` node: assign variables from expressions (`i + 1`, `findings + [stelis.chronicle]`), in order."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.context import AnimaContext
from nodes.kinds.expressions import ExpressionError, evaluate
from nodes.kinds.variables import namespace
from nodes.state import TickState, VarsUpdate


class AssignmentError(ValueError):
    pass


def assign_vars(state: TickState, runtime: Runtime[AnimaContext], node: Any = None) -> VarsUpdate:
    scope = namespace(state)
    assigned: dict[str, Any] = {}
    for name, expression in node.assign.items():
        if isinstance(expression, str):
            try:
                value = evaluate(expression, scope)
            except ExpressionError as exc:
                raise AssignmentError(f"set node {node.id!r}: assign.{name} = {expression!r}: {exc}") from exc
        else:
            value = expression
        assigned[name] = value
        scope[name] = value
        scope["vars"] = {**scope["vars"], name: value}
    return {"vars": assigned}
