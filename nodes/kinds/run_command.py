"""Playbook `command` node: one of the persona's commands (`mcp.call`, `process.start`, `notes.add`, …), its
arguments evaluated from the variables, run through the same consent gate as a command the persona writes in a
tick (nodes/steps/s12_execute_commands.py: `external` and `modify_self` wait for the human's approval unless
`consent.auto_approve` names the type — a playbook without a validate_output step has no validators, so its
commands pass as the persona's do with none; every decision is audited). The output variable receives
{status, result}; the call and its outcome go to the thread's message log (kind `step`, once per task even when a
killed run is resumed, and the command itself runs once: its key is the node's task), so a Stelis thread's
chronicle records every tool call and answer."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

from langgraph.runtime import Runtime

from nodes.commands import Command, registry
from nodes.context import AnimaContext, checkpoint_thread_of, services_of
from nodes.kinds.expressions import ExpressionError, evaluate
from nodes.kinds.variables import namespace
from nodes.state import TickState, VarsUpdate
from nodes.steps.s12_execute_commands import run_one

RESULT_CHARS = 4000  # of a command's result kept in the thread's log (the variable keeps it whole)


class CommandArgsError(ValueError):
    pass


def _evaluated(value: Any, scope: dict[str, Any], where: str) -> Any:
    if isinstance(value, str):
        try:
            return evaluate(value, scope)
        except ExpressionError as exc:
            raise CommandArgsError(f"{where} = {value!r}: {exc}") from exc
    if isinstance(value, dict):
        return {key: _evaluated(item, scope, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_evaluated(item, scope, f"{where}.{i}") for i, item in enumerate(value)]
    return value


def run_command(state: TickState, runtime: Runtime[AnimaContext], node: Any = None, playbook: str = "") -> VarsUpdate:
    services = services_of(runtime)
    thread_id = state.thread_id or checkpoint_thread_of(runtime) or "main"
    task_id = getattr(runtime.execution_info, "task_id", None) or uuid.uuid4().hex
    args = _evaluated(node.args, namespace(state, services.persona.display_name), f"command node {node.id!r}: args")
    commands = registry()
    spec = commands.get(node.command)
    refusal: tuple[str, str] | None = None
    if spec is not None:
        try:
            args = spec.check(args)
        except ValueError as exc:  # ArgsError: which argument is wrong and why
            refusal = ("invalid", str(exc))
    cmd = Command(
        cmd_id=f"{node.id}-{task_id[:12]}",
        type=node.command,
        args=args,
        description=node.description or f"playbook {playbook}: {node.id}",
    )
    with services.managers.unit() as house:
        house.threads.ensure_root(thread_id, persona=services.persona.name, playbook=playbook)
    # no validators rated this (no validate_output step ran): external and modify_self wait for the human
    validation = state.validation or {"auto_pass": True}
    here = dataclasses.replace(
        state, thread_id=thread_id, root_thread=state.root_thread or thread_id, validation=validation
    )
    outcome, events = run_one(cmd, here, services, commands, state.llm.get("llm_id"), refusal)
    for event in events:
        runtime.stream_writer(event)
    status, result = str(outcome.get("status")), str(outcome.get("result") or "")
    runtime.stream_writer(
        {"event": "step", "node": node.id, "thread_id": thread_id, "command": node.command, "status": status}
    )
    with services.managers.unit() as house:
        house.threads.record_step(
            f"step:{thread_id}:{task_id}",
            thread_id=thread_id,
            tick=state.tick,
            role="tool",
            content=f"{node.command} {json.dumps(args, ensure_ascii=False)} → {status}: {result[:RESULT_CHARS]}",
            meta={"node": node.id, "playbook": playbook, "command": node.command, "status": status},
        )
    value: dict[str, Any] = {"status": status, "result": result}
    if outcome.get("approval_id") is not None:
        value["approval_id"] = outcome["approval_id"]
    return {"vars": {node.output: value}}
