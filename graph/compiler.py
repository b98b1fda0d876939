"""Playbook → uncompiled LangGraph `StateGraph` builder. Compile it at the edge with a checkpointer.

Each scope (the top level, each Stelis region) becomes one graph. A region is compiled by its own
builder and added to its parent as the `stelis_start` node, a closure over the compiled child graph, so
LangGraph (and Studio's drawing, with xray) sees it as a subgraph. The region's `stelis_end` is the
child's last node; its `next`/`conditional_next` become the edges out of the parent's node.
A `subplaybook` is compiled from the callee playbook the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.graph import END as LG_END
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graph.playbook import (
    END,
    CommandNode,
    ConditionalNext,
    LLMNode,
    Playbook,
    SetNode,
    StelisStartNode,
    StepNode,
    SubplaybookNode,
    coerce_inputs,
)
from graph.playbook.checks import Scope, compute_scopes
from llm import LLMCancelled
from nodes import STEPS, AnimaContext, TickState
from nodes.kinds.ask_llm import ask_llm
from nodes.kinds.assign_vars import assign_vars
from nodes.kinds.call_subplaybook import call_subplaybook
from nodes.kinds.run_command import run_command
from nodes.kinds.variables import lookup
from nodes.state import VarsUpdate
from nodes.stelis.region import end_stelis, enter_stelis

Step = Callable[..., Any]  # a node's function: (state, runtime, **bound) → the state keys it writes
TickGraph = StateGraph[TickState, Any, TickState, TickState]  # a scope's builder; compiled at the edge
CompiledTick = CompiledStateGraph[TickState, Any, TickState, TickState]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a is not None and a > b,
    "gte": lambda a, b: a is not None and a >= b,
    "lt": lambda a, b: a is not None and a < b,
    "lte": lambda a, b: a is not None and a <= b,
    "in": lambda a, b: a in b,
}


def _coerce(raw: str, like: Any) -> Any:
    if isinstance(like, bool):
        return raw.lower() in ("true", "1", "yes")
    if isinstance(like, (int, float)) and not isinstance(like, bool):
        try:
            return type(like)(raw)
        except ValueError:
            try:
                return float(raw)
            except ValueError:
                return raw
    if like is None and raw.lower() in ("null", "none"):
        return None
    return raw


def make_router(cond: ConditionalNext) -> Callable[[TickState], str]:
    def route(state: TickState) -> str:
        value = lookup(state, cond.field)
        for case, target in cond.cases.items():
            expected = (
                [_coerce(v.strip(), value) for v in case.split(",")] if cond.operator == "in" else _coerce(case, value)
            )
            try:
                if _OPS[cond.operator](value, expected):
                    return target
            except TypeError:  # e.g. comparing text with a number: not a match
                continue
        return cond.default or END

    return route


def _bind(func: Step, **bound: Any) -> Step:
    step = functools.partial(func, **bound)
    functools.update_wrapper(step, func)
    return step


def _stops_on_cancel(step: Step, node_id: str) -> Step:
    """A model call cancelled by a stop request ends the step as a drain would: the checkpoint keeps the steps
    before it, nothing of this one is written, and it runs again when the run resumes. The step runs in an
    OpenTelemetry span (a no-op without a configured SDK: graph/telemetry.py) — in this one wrapper, so LangGraph
    still finds a Stelis region's subgraph through it."""

    @functools.wraps(step)
    def stoppable(*args: Any, **kwargs: Any) -> Any:
        from opentelemetry import trace

        with trace.get_tracer("anima").start_as_current_span(f"step {node_id}", attributes={"anima.step": node_id}):
            try:
                return step(*args, **kwargs)
            except LLMCancelled as exc:
                raise GraphDrained(f"interrupt: {exc}") from exc

    return stoppable


def _stelis_node(node: StelisStartNode, child: CompiledTick, playbook: str) -> Step:
    def run_stelis_thread(state: TickState, runtime: Runtime[AnimaContext]) -> VarsUpdate:
        return enter_stelis(state, runtime, node, child, playbook)

    return run_stelis_thread


def _subplaybook_node(node: SubplaybookNode, callee: CompiledTick, callee_pb: Playbook) -> Step:
    def prepare(given: dict[str, Any]) -> dict[str, Any]:
        return coerce_inputs(callee_pb, given)

    def run_subplaybook(state: TickState, runtime: Runtime[AnimaContext]) -> VarsUpdate:
        return call_subplaybook(state, runtime, node, callee, prepare, callee_pb.outputs)

    return run_subplaybook


def _add_edges(builder: TickGraph, source: str, node: Any) -> None:
    if node.next:
        builder.add_edge(source, LG_END if node.next == END else node.next)
    elif node.conditional_next:
        cond = node.conditional_next
        targets = {t for t in [*cond.cases.values(), cond.default or END]}
        builder.add_conditional_edges(source, make_router(cond), {t: (LG_END if t == END else t) for t in targets})


def build_graph(
    playbook: Playbook, steps: dict[str, Step] | None = None, context_schema: type[Any] = AnimaContext
) -> TickGraph:
    scopes, _, _ = compute_scopes(playbook)
    return _build_scope(playbook, scopes, None, steps or STEPS, context_schema)


def _build_scope(
    pb: Playbook, scopes: dict[str | None, Scope], key: str | None, steps: dict[str, Step], context_schema: type[Any]
) -> TickGraph:
    scope = scopes[key]
    by_id = {n.id: n for n in pb.nodes}
    builder: TickGraph = StateGraph(TickState, context_schema=context_schema)

    def add(node_id: str, step: Step) -> None:
        builder.add_node(node_id, _stops_on_cancel(step, node_id))

    for node_id in scope.members:
        node = by_id[node_id]
        if isinstance(node, StelisStartNode):
            child = _build_scope(pb, scopes, node.id, steps, context_schema).compile(name=f"stelis:{node.id}")
            add(node_id, _stelis_node(node, child, pb.name))
        elif isinstance(node, SubplaybookNode):
            callee_pb = pb.subplaybooks[node.id]
            callee = build_graph(callee_pb, steps, context_schema).compile(name=f"playbook:{callee_pb.name}")
            add(node_id, _subplaybook_node(node, callee, callee_pb))
        elif isinstance(node, LLMNode):
            add(node_id, _bind(ask_llm, node=node, playbook=pb.name))
        elif isinstance(node, SetNode):
            add(node_id, _bind(assign_vars, node=node))
        elif isinstance(node, CommandNode):
            add(node_id, _bind(run_command, node=node, playbook=pb.name))
        else:
            assert isinstance(node, StepNode), f"{node_id}: a stelis_end closes its scope, never runs inside it"
            params = {**pb.settings, "playbook": pb.name, **node.params}
            add(node_id, _bind(steps[node.type], params=params))
    if scope.end is not None:
        add(scope.end, _bind(end_stelis, node=by_id[scope.end]))
        builder.add_edge(scope.end, LG_END)
    builder.add_edge(START, scope.entry)
    for node_id in scope.members:
        node = by_id[node_id]
        end = scopes[node_id].end if isinstance(node, StelisStartNode) else None  # a region leaves by its end's edges
        _add_edges(builder, node_id, by_id[end] if end is not None else node)
    return builder
