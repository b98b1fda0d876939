"""Playbooks: YAML → validated pydantic model, with errors that name the file, the line and the field.

    repl.yaml:14 nodes[3].next: unknown node 'finsh'

The YAML is composed once to remember the line of every field; pydantic errors and the graph checks
(unknown step types, dangling targets, unreachable nodes) are reported against those lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

END = "END"


class ConditionalNext(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str = Field(description="dot path into the state, e.g. novelty.stagnation_flag")
    operator: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in"] = "eq"
    cases: dict[str, str] = Field(description="value -> node id")
    default: str | None = None


class PlaybookNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    type: str = Field(min_length=1, description="a built-in step (see nodes.STEPS)")
    next: str | None = None
    conditional_next: ConditionalNext | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="options passed to the step")


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    settings: dict[str, Any] = Field(default_factory=dict, description="defaults for every node's params (e.g. mode)")
    start: str
    nodes: list[PlaybookNode] = Field(min_length=1)
    source: str | None = Field(default=None, exclude=True)

    def node(self, node_id: str) -> PlaybookNode:
        return next(n for n in self.nodes if n.id == node_id)


class PlaybookError(ValueError):
    def __init__(self, issues: list[str]):
        self.issues = issues
        super().__init__("\n".join(issues))


def _line_map(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[path + (key.value,)] = key.start_mark.line + 1
            lines.update(_line_map(value, path + (key.value,)))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.update(_line_map(item, path + (index,)))
    return lines


def _format_path(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _line_for(lines: dict[tuple, int], path: tuple) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def _graph_issues(pb: Playbook, steps: set[str]) -> list[tuple[tuple, str]]:
    issues: list[tuple[tuple, str]] = []
    ids = [n.id for n in pb.nodes]
    known = set(ids) | {END}
    for index, node in enumerate(pb.nodes):
        if ids.count(node.id) > 1 and ids.index(node.id) != index:
            issues.append((("nodes", index, "id"), f"duplicate node id {node.id!r}"))
        if node.type not in steps:
            issues.append((("nodes", index, "type"), f"unknown step type {node.type!r} (known: {', '.join(sorted(steps))})"))
        if node.next is None and node.conditional_next is None:
            issues.append((("nodes", index), f"node {node.id!r} has neither next nor conditional_next (use next: END)"))
        if node.next is not None and node.conditional_next is not None:
            issues.append((("nodes", index, "conditional_next"), "give either next or conditional_next, not both"))
        if node.next is not None and node.next not in known:
            issues.append((("nodes", index, "next"), f"unknown node {node.next!r}"))
        if node.conditional_next:
            for value, target in node.conditional_next.cases.items():
                if target not in known:
                    issues.append((("nodes", index, "conditional_next", "cases", value), f"unknown node {target!r}"))
            default = node.conditional_next.default
            if default is not None and default not in known:
                issues.append((("nodes", index, "conditional_next", "default"), f"unknown node {default!r}"))
    if pb.start not in set(ids):
        issues.append((("start",), f"unknown node {pb.start!r}"))
        return issues
    reachable, frontier = set(), [pb.start]
    by_id = {n.id: n for n in pb.nodes}
    while frontier:
        current = frontier.pop()
        if current in reachable or current not in by_id:
            continue
        reachable.add(current)
        node = by_id[current]
        targets = [node.next] if node.next else []
        if node.conditional_next:
            targets += list(node.conditional_next.cases.values()) + [node.conditional_next.default]
        frontier += [t for t in targets if t and t != END]
    for index, node in enumerate(pb.nodes):
        if node.id not in reachable:
            issues.append((("nodes", index, "id"), f"node {node.id!r} is unreachable from start {pb.start!r}"))
    return issues


def parse_playbook(text: str, source: str = "<playbook>", steps: set[str] | None = None) -> Playbook:
    name = Path(source).name
    try:
        tree = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PlaybookError([f"{name}:{mark.line + 1 if mark else 1} (yaml): {getattr(exc, 'problem', None) or exc}"]) from exc
    if tree is None:
        raise PlaybookError([f"{name}:1 (top level): empty playbook"])
    lines = _line_map(tree)
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise PlaybookError([f"{name}:1 (top level): expected a mapping, got {type(data).__name__}"])
    try:
        pb = Playbook.model_validate(data)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            path = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            issues.append(f"{name}:{_line_for(lines, path)} {_format_path(path)}: {err['msg']}")
        raise PlaybookError(issues) from None
    if steps is None:
        from nodes import STEPS

        steps = set(STEPS)
    problems = _graph_issues(pb, steps)
    if problems:
        raise PlaybookError([f"{name}:{_line_for(lines, p)} {_format_path(p)}: {m}" for p, m in problems])
    pb.source = source
    return pb


def load_playbook(path: str | Path) -> Playbook:
    path = Path(path)
    if not path.exists():
        raise PlaybookError([f"{path}: no such playbook file"])
    return parse_playbook(path.read_text(encoding="utf-8"), str(path))


def playbook_json_schema() -> str:
    return json.dumps(Playbook.model_json_schema(), indent=2)


def shipped_playbooks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "playbooks"
