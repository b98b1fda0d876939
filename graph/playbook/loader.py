"""Reading playbooks: YAML → validated `Playbook`, with errors that name the file, the line and the field.

    deep_work.yaml:14 nodes[3].conditional_next.cases.done: unknown node 'finish'

The YAML is read with the line of every field (persona/yaml_lines.py); pydantic errors and the graph checks
(checks.py: unknown steps, dangling targets, unreachable nodes, Stelis regions, templates, subplaybooks) are
reported against those lines. Subplaybooks are loaded here, before the checks, which only read them.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from graph.playbook.checks import Issue, Where, check_playbook
from graph.playbook.model import SPECIAL_TYPES, Playbook, PlaybookError, SubplaybookNode
from nodes import STEPS
from persona.yaml_lines import YamlError, format_path, parse_lined_yaml


def _error_path(loc: Where) -> Where:
    path = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    if len(path) > 2 and path[0] == "nodes" and isinstance(path[1], int) and path[2] in (*SPECIAL_TYPES, "step"):
        path = path[:2] + path[3:]  # drop the union tag pydantic inserts
    return path


def parse_playbook(
    text: str, source: str = "<playbook>", steps: set[str] | None = None, _stack: tuple[str, ...] = ()
) -> Playbook:
    name = Path(source).name
    try:
        doc = parse_lined_yaml(text, source)
    except YamlError as exc:
        raise PlaybookError([str(exc).replace(" (top level): empty file", " (top level): empty playbook")]) from None
    try:
        pb = Playbook.model_validate(doc.data)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            path = _error_path(err["loc"])
            issues.append(f"{name}:{doc.line_of(path)} {format_path(path)}: {err['msg']}")
        raise PlaybookError(list(dict.fromkeys(issues))) from None
    pb.source = source
    stack = _stack + (str(Path(source).resolve()),)
    problems = _load_subplaybooks(pb, stack)
    problems += check_playbook(pb, set(STEPS) if steps is None else steps, STEPS)
    if problems:
        raise PlaybookError([f"{name}:{doc.line_of(p)} {format_path(p)}: {m}" for p, m in problems])
    return pb


def _load_subplaybooks(pb: Playbook, stack: tuple[str, ...]) -> list[Issue]:
    """Load every `subplaybook` callee into `pb.subplaybooks`; the problems found (cycles, missing, invalid)."""
    issues: list[Issue] = []
    for index, node in enumerate(pb.nodes):
        if not isinstance(node, SubplaybookNode):
            continue
        at = ("nodes", index, "playbook")
        path = resolve_playbook_path(node.playbook, pb.source)
        resolved = str(path.resolve())
        if resolved in stack:
            chain = " → ".join(Path(p).stem for p in stack[stack.index(resolved) :]) + f" → {path.stem}"
            issues.append((at, f"subplaybook cycle: {chain}"))
        elif not path.exists():
            issues.append((at, f"no playbook {node.playbook!r} (looked for {path})"))
        else:
            try:
                pb.subplaybooks[node.id] = load_playbook(path, _stack=stack)
            except PlaybookError as exc:
                issues.append((at, f"subplaybook {node.playbook!r} is invalid: {exc.issues[0]}"))
    return issues


def load_playbook(path: str | Path, _stack: tuple[str, ...] = ()) -> Playbook:
    path = Path(path)
    if not path.exists():
        raise PlaybookError([f"{path}: no such playbook file"])
    return parse_playbook(path.read_text(encoding="utf-8"), str(path), _stack=_stack)


def resolve_playbook_path(reference: str | Path, relative_to: str | Path | None = None) -> Path:
    """A file path as given, relative to the calling playbook, or a shipped playbook's name."""
    path = Path(reference)
    candidates = [path]
    if relative_to is not None and not path.is_absolute():
        candidates.insert(0, Path(relative_to).parent / path)
    if not path.suffix:
        candidates.append(shipped_playbooks_dir() / f"{reference}.yaml")
    return next((c for c in candidates if c.exists()), candidates[-1])


def shipped_playbooks_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "playbooks"


def playbook_json_schema() -> str:
    schema = Playbook.model_json_schema(by_alias=True)
    step_def = schema.get("$defs", {}).get("StepNode")
    if step_def:  # editors can complete the built-in step names
        step_def["properties"]["type"] = {"enum": sorted(STEPS), "title": "Type", "description": "a built-in tick step"}
    return json.dumps(schema, indent=2)
