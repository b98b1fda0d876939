"""The playbook language: the pydantic model a playbook YAML is validated against (loader.py reads the YAML,
checks.py checks the graph).

Node types: the built-in tick steps (nodes.STEPS, options under `params`), `llm`, `set`, `command` (one of the
persona's commands, through the consent gate), `subplaybook`, `stelis_start` and `stelis_end`. Variables (inputs, `llm`
outputs, `set` assignments)
live in the state's `vars`; templates and expressions see them by name.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

END = "END"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
SPECIAL_TYPES = ("llm", "set", "command", "subplaybook", "stelis_start", "stelis_end")


class ConditionalNext(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str = Field(description="dot path: a state field (novelty.stagnation_flag) or a variable (plan.done)")
    operator: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in"] = "eq"
    cases: dict[str, str] = Field(description="value -> node id; for `in`, the value is a comma-separated list")
    default: str | None = Field(default=None, description="node id when no case matches (END if omitted)")


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    id: str = Field(min_length=1)
    description: str = ""
    next: str | None = None
    conditional_next: ConditionalNext | None = None

    def targets(self) -> list[str]:
        if self.next is not None:
            return [self.next]
        if self.conditional_next is not None:
            return [*self.conditional_next.cases.values(), self.conditional_next.default or END]
        return []


class StepNode(_Node):
    type: str = Field(min_length=1, description="a built-in tick step (see nodes.STEPS)")
    params: dict[str, Any] = Field(default_factory=dict, description="options passed to the step")


class LLMNode(_Node):
    type: Literal["llm"]
    prompt: str = Field(
        min_length=1,
        description="Jinja template over the variables; {{ history }} is the thread's history, fitted to its window",
    )
    output: str = Field(pattern=IDENTIFIER, description="variable that receives the answer")
    system: str | None = Field(default=None, description="optional system message template (chat models)")
    json_schema: dict[str, Any] | None = Field(
        default=None, alias="schema", description="JSON Schema for a structured answer"
    )
    purpose: str = "step"
    max_tokens: int = Field(default=256, ge=1, le=32768)
    temperature: float | None = Field(default=None, ge=0, le=2)
    record: bool = Field(default=True, description="write the answer to the thread's message log")


class SetNode(_Node):
    type: Literal["set"]
    assign: dict[str, Any] = Field(
        min_length=1, description="name -> expression (strings) or literal; evaluated in order"
    )


class CommandNode(_Node):
    type: Literal["command"]
    command: str = Field(
        pattern=r"^[a-z_]+\.[a-z_]+$",
        description="a persona command (help.show lists them), e.g. "
        "mcp.call; it passes the consent gate as the persona's own would",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="argument -> expression (strings, also inside "
        "lists and objects) or literal; a literal string is quoted: \"'tools'\"",
    )
    output: str = Field(pattern=IDENTIFIER, description="variable that receives {status, result}")


class SubplaybookNode(_Node):
    type: Literal["subplaybook"]
    playbook: str = Field(min_length=1, description="file path (relative to this playbook) or shipped name")
    inputs: dict[str, Any] = Field(default_factory=dict, description="callee input -> expression (strings) or literal")
    outputs: dict[str, str] | None = Field(
        default=None, description="caller variable -> callee output; default: all, same names"
    )


class StelisStartNode(_Node):
    type: Literal["stelis_start"]
    label: str = Field(min_length=1, description="template, e.g. 'task {{ i + 1 }}'")
    window_ratio: float = Field(default=0.8, gt=0, le=1, description="the child's share of its parent's window")
    max_depth: int = Field(default=3, ge=1, le=10)
    chronicle_prompt: str | None = Field(
        default=None, description="what the chronicle must cover (default: everything)"
    )
    result: str = Field(
        default="stelis", pattern=IDENTIFIER, description="variable receiving {thread_id, status, chronicle, …}"
    )
    outputs: list[Annotated[str, Field(pattern=IDENTIFIER)]] = Field(
        default_factory=list, description="child variables copied back to the parent"
    )


class StelisEndNode(_Node):
    type: Literal["stelis_end"]
    generate_chronicle: bool = True


def _node_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in SPECIAL_TYPES else "step"


PlaybookNode = Annotated[
    Annotated[LLMNode, Tag("llm")]
    | Annotated[SetNode, Tag("set")]
    | Annotated[CommandNode, Tag("command")]
    | Annotated[SubplaybookNode, Tag("subplaybook")]
    | Annotated[StelisStartNode, Tag("stelis_start")]
    | Annotated[StelisEndNode, Tag("stelis_end")]
    | Annotated[StepNode, Tag("step")],  # noqa: E501
    Discriminator(_node_kind),
]


class InputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["string", "integer", "number", "boolean", "array", "object"] = "string"
    required: bool = False
    default: Any = None
    description: str = ""


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    loop: bool = Field(default=False, description="true: the driver runs it once per tick until stopped (repl, epos)")
    settings: dict[str, Any] = Field(default_factory=dict, description="defaults for every step's params (e.g. mode)")
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    outputs: list[str] = Field(
        default_factory=list, description="variables copied back to the caller / printed by the CLI"
    )
    start: str
    nodes: list[PlaybookNode] = Field(min_length=1)
    source: str | None = Field(default=None, exclude=True)
    subplaybooks: dict[str, Playbook] = Field(default_factory=dict, exclude=True)

    def node(self, node_id: str) -> Any:
        return next(n for n in self.nodes if n.id == node_id)


class PlaybookError(ValueError):
    def __init__(self, issues: list[str]):
        self.issues = issues
        super().__init__("\n".join(issues))


class InputError(ValueError):
    pass


def coerce_inputs(pb: Playbook, given: dict[str, Any]) -> dict[str, Any]:
    """Inputs checked against the playbook's declaration: strings from the command line are converted."""
    unknown = sorted(set(given) - set(pb.inputs))
    if unknown:
        raise InputError(
            f"playbook {pb.name!r} has no input {', '.join(map(repr, unknown))} "
            f"(inputs: {', '.join(pb.inputs) or 'none'})"
        )
    values: dict[str, Any] = {}
    for key, spec in pb.inputs.items():
        if key not in given:
            if spec.required:
                raise InputError(f"playbook {pb.name!r} needs input {key!r} ({spec.type}): pass --input {key}=…")
            values[key] = spec.default
            continue
        values[key] = _coerce_input(pb.name, key, spec, given[key])
    return values


def _coerce_input(playbook: str, key: str, spec: InputSpec, value: Any) -> Any:
    try:
        if isinstance(value, str) and spec.type != "string":
            if spec.type == "boolean":
                if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return value.strip().lower() in ("true", "1", "yes")
            value = (
                json.loads(value)
                if spec.type in ("array", "object")
                else float(value)
                if spec.type == "number"
                else int(value)
            )
        kinds: dict[str, type | tuple[type, ...]] = {
            "string": str,
            "integer": int,
            "number": (int, float),
            "boolean": bool,
            "array": list,
            "object": dict,
        }
        expected = kinds[spec.type]
        if not isinstance(value, expected) or (spec.type in ("integer", "number") and isinstance(value, bool)):
            raise TypeError(type(value).__name__)
        return value
    except (ValueError, TypeError) as exc:
        raise InputError(f"playbook {playbook!r}: input {key!r} must be {spec.type}, got {value!r}") from exc
