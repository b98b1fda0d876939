"""Playbook `subplaybook` node: run another playbook's graph as a subgraph with inputs, copy its outputs back.

The callee runs on the caller's thread (it writes to the same message log) with its own variables:
only the declared inputs go in and only its declared outputs come back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from nodes.context import AnimaContext, services_of
from nodes.kinds.expressions import ExpressionError, evaluate
from nodes.kinds.variables import namespace
from nodes.state import TickState, VarsUpdate


class SubplaybookError(ValueError):
    pass


def call_subplaybook(
    state: TickState,
    runtime: Runtime[AnimaContext],
    node: Any,
    callee: Any,
    prepare_inputs: Callable[[dict[str, Any]], dict[str, Any]],
    callee_outputs: list[str],
) -> VarsUpdate:
    services = services_of(runtime)
    scope = namespace(state, services.persona.display_name)
    given: dict[str, Any] = {}
    for name, expression in node.inputs.items():
        try:
            given[name] = evaluate(expression, scope) if isinstance(expression, str) else expression
        except ExpressionError as exc:
            raise SubplaybookError(f"subplaybook node {node.id!r}: inputs.{name} = {expression!r}: {exc}") from exc
    try:
        inputs = prepare_inputs(given)
    except ValueError as exc:
        raise SubplaybookError(f"subplaybook node {node.id!r}: {exc}") from exc
    final = callee.invoke(
        {
            "thread_id": state.thread_id,
            "root_thread": state.root_thread,
            "run_id": state.run_id,
            "tick": state.tick,
            "mode": state.mode,
            "vars": inputs,
        }
    )
    produced = dict((final or {}).get("vars") or {})
    mapping = node.outputs or {name: name for name in callee_outputs}
    return {"vars": {caller: produced.get(callee_name) for caller, callee_name in mapping.items()}}
