"""Static checks of a parsed playbook: each problem is (field path, message); loader.py adds file and line.

Besides dangling targets and unreachable nodes, Stelis regions are checked here. The region of a
`stelis_start` is everything reachable from its `next` up to its `stelis_end`, with nested regions
opaque. A region must reach exactly one `stelis_end`, must not reach END, and no node may belong to two
regions (an edge that jumps into or out of a region crosses it). Nesting deeper than `max_depth` is
an error here when it is static; at run time a dynamic nesting is refused (nodes/stelis.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graph.playbook.model import (
    END,
    CommandNode,
    LLMNode,
    Playbook,
    SetNode,
    StelisEndNode,
    StelisStartNode,
    StepNode,
    SubplaybookNode,
)
from nodes.kinds.expressions import syntax_error
from nodes.kinds.variables import RESERVED_NAMES
from nodes.state import STATE_FIELDS

Where = tuple[str | int, ...]  # a place in the playbook: keys and list indexes
Issue = tuple[Where, str]
TOP = "(top level)"


@dataclass
class Scope:
    """The nodes that run in one graph: the top level or one Stelis region (nested regions opaque)."""

    start: str | None  # the stelis_start id, None for the top level
    entry: str
    members: list[str] = field(default_factory=list)
    end: str | None = None  # the stelis_end that closes the region
    depth: int = 0


def check_playbook(pb: Playbook, steps: set[str], registry: dict[str, Any]) -> list[Issue]:
    """Problems of `pb` (its subplaybooks already loaded); `registry` maps step types to their functions, whose
    `produces` attribute names the variables a step sets."""
    issues = _node_issues(pb, steps)
    ids = [n.id for n in pb.nodes]
    if pb.start not in ids:
        return issues + [(("start",), f"unknown node {pb.start!r}")]
    if issues:  # structure first: region and reachability checks need valid targets
        return issues
    scopes, reached_ends, region_issues = compute_scopes(pb)
    issues += region_issues
    reached = {m for s in scopes.values() for m in s.members} | reached_ends
    for index, node in enumerate(pb.nodes):
        if node.id not in reached:
            issues.append((("nodes", index, "id"), f"node {node.id!r} is unreachable from start {pb.start!r}"))
    issues += _subplaybook_issues(pb)
    issues += _output_issues(pb, registry)
    return issues


def _index(pb: Playbook) -> dict[str, int]:
    return {n.id: i for i, n in enumerate(pb.nodes)}


def _node_issues(pb: Playbook, steps: set[str]) -> list[Issue]:
    issues: list[Issue] = []
    ids = [n.id for n in pb.nodes]
    known = set(ids) | {END}
    reserved = set(STATE_FIELDS) | RESERVED_NAMES
    for index, node in enumerate(pb.nodes):
        at = ("nodes", index)
        if ids.count(node.id) > 1 and ids.index(node.id) != index:
            issues.append((at + ("id",), f"duplicate node id {node.id!r}"))
        if node.id == END:
            issues.append((at + ("id",), "END is reserved for the end of the graph"))
        if isinstance(node, StepNode) and node.type not in steps:
            issues.append(
                (
                    at + ("type",),
                    f"unknown step type {node.type!r} (known: {', '.join(sorted(steps))}, "
                    "llm, set, subplaybook, stelis_start, stelis_end)",
                )
            )
        if node.next is None and node.conditional_next is None:
            issues.append((at, f"node {node.id!r} has neither next nor conditional_next (use next: END)"))
        if node.next is not None and node.conditional_next is not None:
            issues.append((at + ("conditional_next",), "give either next or conditional_next, not both"))
        if isinstance(node, StelisStartNode) and node.conditional_next is not None:
            issues.append(
                (at + ("conditional_next",), "a stelis_start continues with `next` (the thread's first node)")
            )
        if node.next is not None and node.next not in known:
            issues.append((at + ("next",), f"unknown node {node.next!r}"))
        if node.conditional_next:
            for value, target in node.conditional_next.cases.items():
                if target not in known:
                    issues.append((at + ("conditional_next", "cases", value), f"unknown node {target!r}"))
            default = node.conditional_next.default
            if default is not None and default not in known:
                issues.append((at + ("conditional_next", "default"), f"unknown node {default!r}"))
        issues += [(at + path, message) for path, message in _expression_issues(node, reserved)]
    return issues


def _expression_issues(node: Any, reserved: set[str]) -> list[Issue]:
    issues: list[Issue] = []

    def template(path: Where, text: str | None, kind: str = "template") -> None:
        if text is not None:
            problem = syntax_error(text, kind)
            if problem:
                issues.append((path, f"bad {kind}: {problem}"))

    def name(path: Where, var: str) -> None:
        if var in reserved:
            issues.append((path, f"{var!r} is reserved (a state field or template name); choose another variable name"))
        elif not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", var):
            issues.append((path, f"{var!r} is not a valid variable name"))

    if isinstance(node, LLMNode):
        template(("prompt",), node.prompt)
        template(("system",), node.system)
        name(("output",), node.output)
    elif isinstance(node, SetNode):
        for var, expr in node.assign.items():
            name(("assign", var), var)
            if isinstance(expr, str):
                template(("assign", var), expr, "expression")
    elif isinstance(node, CommandNode):
        name(("output",), node.output)
        for path, expr in _strings(node.args, ("args",)):
            template(path, expr, "expression")
    elif isinstance(node, SubplaybookNode):
        for var, expr in node.inputs.items():
            if isinstance(expr, str):
                template(("inputs", var), expr, "expression")
        for var in node.outputs or {}:
            name(("outputs", var), var)
    elif isinstance(node, StelisStartNode):
        template(("label",), node.label)
        name(("result",), node.result)
    return issues


def _strings(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """Every string inside a command node's args (an expression each), with its path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _strings(item, path + (key,))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _strings(item, path + (index,))]
    return []


def compute_scopes(pb: Playbook) -> tuple[dict[str | None, Scope], set[str], list[Issue]]:
    """Scopes keyed by their stelis_start id (None: top level), every stelis_end reached, and the
    region problems found."""
    by_id = {n.id: n for n in pb.nodes}
    idx = _index(pb)
    issues: list[Issue] = []
    scopes: dict[str | None, Scope] = {}
    owner: dict[str, str | None] = {}  # node -> the scope it was first reached in
    reached_ends: set[str] = set()

    def label(scope_key: str | None) -> str:
        return TOP if scope_key is None else f"Stelis thread {scope_key!r}"

    def walk(scope: Scope) -> None:
        frontier, seen = [scope.entry], set()
        ends: list[str] = []
        while frontier:
            current = frontier.pop(0)
            if current in seen:
                continue
            seen.add(current)
            if current == END:
                if scope.start is not None:
                    issues.append(
                        (
                            ("nodes", idx[scope.start], "id"),
                            f"Stelis thread {scope.start!r} can reach END without passing a stelis_end "
                            "(check `next` and conditional defaults inside it)",
                        )
                    )
                continue
            node = by_id[current]
            if isinstance(node, StelisEndNode):
                reached_ends.add(current)
                if scope.start is None:
                    issues.append(
                        (
                            ("nodes", idx[current], "type"),
                            f"stelis_end {current!r} is reached without a stelis_start before it",
                        )
                    )
                    continue
                if current not in ends:
                    ends.append(current)
                continue
            if current in owner and owner[current] != scope.start:
                issues.append(
                    (
                        ("nodes", idx[current], "id"),
                        f"node {current!r} is reached both in {label(owner[current])} and in {label(scope.start)}: "
                        "an edge crosses a Stelis boundary (enter only through stelis_start, leave only "
                        "through its stelis_end)",
                    )
                )
                continue
            owner[current] = scope.start
            scope.members.append(current)
            if isinstance(node, StelisStartNode):
                if node.id in scopes:
                    continue
                child = Scope(node.id, node.next or END, depth=scope.depth + 1)
                scopes[node.id] = child
                if child.depth > node.max_depth:
                    issues.append(
                        (
                            ("nodes", idx[node.id], "max_depth"),
                            f"Stelis thread {node.id!r} is nested {child.depth} deep, over its max_depth "
                            f"{node.max_depth}",
                        )
                    )
                walk(child)
                if child.end is not None:
                    frontier += by_id[child.end].targets()
                continue
            frontier += node.targets()
        if scope.start is not None:
            if not ends:
                issues.append(
                    (("nodes", idx[scope.start], "next"), f"stelis_start {scope.start!r} never reaches a stelis_end")
                )
            elif len(ends) > 1:
                issues.append(
                    (
                        ("nodes", idx[scope.start], "next"),
                        f"stelis_start {scope.start!r} reaches several stelis_end nodes "
                        f"({', '.join(map(repr, ends))}); a thread has exactly one",
                    )
                )
            else:
                scope.end = ends[0]
                closer = next((s for k, s in scopes.items() if k != scope.start and s.end == ends[0]), None)
                if closer is not None:
                    issues.append(
                        (
                            ("nodes", idx[ends[0]], "id"),
                            f"stelis_end {ends[0]!r} closes both {closer.start!r} and {scope.start!r}",
                        )
                    )

    top = Scope(None, pb.start)
    scopes[None] = top
    walk(top)
    return scopes, reached_ends, issues


def _subplaybook_issues(pb: Playbook) -> list[Issue]:
    issues: list[Issue] = []
    for index, node in enumerate(pb.nodes):
        if not isinstance(node, SubplaybookNode) or (callee := pb.subplaybooks.get(node.id)) is None:
            continue  # not a subplaybook, or it failed to load (the loader reported why)
        at: Where = ("nodes", index)
        for key in node.inputs:
            if key not in callee.inputs:
                issues.append(
                    (
                        at + ("inputs", key),
                        f"{callee.name!r} has no input {key!r} (inputs: {', '.join(callee.inputs) or 'none'})",
                    )
                )
        for key, spec in callee.inputs.items():
            if spec.required and key not in node.inputs:
                issues.append((at + ("inputs",), f"{callee.name!r} needs input {key!r}"))
        for caller_var, callee_var in (node.outputs or {}).items():
            if callee_var not in callee.outputs:
                issues.append(
                    (
                        at + ("outputs", caller_var),
                        f"{callee.name!r} has no output {callee_var!r} "
                        f"(outputs: {', '.join(callee.outputs) or 'none'})",
                    )
                )
    return issues


def produced_names(pb: Playbook, registry: dict[str, Any]) -> set[str]:
    names = set(pb.inputs)
    for node in pb.nodes:
        if isinstance(node, LLMNode):
            names.add(node.output)
        elif isinstance(node, SetNode):
            names |= set(node.assign)
        elif isinstance(node, CommandNode):
            names.add(node.output)
        elif isinstance(node, SubplaybookNode):
            callee = pb.subplaybooks.get(node.id)
            names |= set(node.outputs or (callee.outputs if callee else []))
        elif isinstance(node, StelisStartNode):
            names |= {node.result, *node.outputs}
        elif isinstance(node, StepNode):  # a built-in step may declare the variables it sets
            names |= set(getattr(registry.get(node.type), "produces", ()))
    return names


def _output_issues(pb: Playbook, registry: dict[str, Any]) -> list[Issue]:
    issues: list[Issue] = []
    produced = produced_names(pb, registry)
    for key, spec in pb.inputs.items():
        if spec.required and spec.default is not None:
            issues.append((("inputs", key, "default"), "a required input takes no default"))
    for index, var in enumerate(pb.outputs):
        if var not in produced:
            issues.append(
                (
                    ("outputs", index),
                    f"output {var!r} is never set by an input, llm, set, subplaybook, step or stelis_start node",
                )
            )
    return issues
