"""Playbook → uncompiled LangGraph `StateGraph` builder. Compile it at the edge with a checkpointer."""

from __future__ import annotations

import functools
from typing import Any, Callable

from langgraph.graph import END as LG_END
from langgraph.graph import START, StateGraph

from graph.playbook import END, ConditionalNext, Playbook
from nodes import STEPS, AnimaContext, TickState

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "gt": lambda a, b: a is not None and a > b, "gte": lambda a, b: a is not None and a >= b,
    "lt": lambda a, b: a is not None and a < b, "lte": lambda a, b: a is not None and a <= b,
    "in": lambda a, b: a in b,
}


def _lookup(state: dict, dotted: str) -> Any:
    value: Any = state
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def _coerce(raw: str, like: Any) -> Any:
    if isinstance(like, bool):
        return raw.lower() in ("true", "1", "yes")
    if isinstance(like, (int, float)) and not isinstance(like, bool):
        try:
            return type(like)(raw)
        except ValueError:
            return raw
    return raw


def make_router(cond: ConditionalNext) -> Callable[[dict], str]:
    def route(state: dict) -> str:
        value = _lookup(state, cond.field)
        for case, target in cond.cases.items():
            expected = [_coerce(v.strip(), value) for v in case.split(",")] if cond.operator == "in" else _coerce(case, value)
            if _OPS[cond.operator](value, expected):
                return target
        return cond.default or END

    return route


def build_graph(playbook: Playbook, steps: dict[str, Callable] | None = None,
                context_schema: type = AnimaContext) -> StateGraph:
    steps = steps or STEPS
    builder = StateGraph(TickState, context_schema=context_schema)
    for node in playbook.nodes:
        params = {**playbook.settings, "playbook": playbook.name, **node.params}
        step = functools.partial(steps[node.type], params=params)
        functools.update_wrapper(step, steps[node.type])
        builder.add_node(node.id, step)
    builder.add_edge(START, playbook.start)
    for node in playbook.nodes:
        if node.next:
            builder.add_edge(node.id, LG_END if node.next == END else node.next)
        elif node.conditional_next:
            cond = node.conditional_next
            targets = {t for t in [*cond.cases.values(), cond.default or END]}
            builder.add_conditional_edges(node.id, make_router(cond),
                                          {t: (LG_END if t == END else t) for t in targets})
    return builder
