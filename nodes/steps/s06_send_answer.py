"""Step 6, after the commands are read (and the reply turn): a tick that answers someone sends its messages now.

The reflexes' calls after the thought (emotion, novelty, validators) and the memory upkeep are the persona's own
business; the person who wrote should not wait for them (DESIGN.md §9: one model call from a note to its answer).
So when the tick answers a person or a peer (`TickState.audience`), its `messages.send` commands run here, through
the same consent gate and exactly-once record as in execute_commands (`run_one`), which then finds them done. Not
when validators are configured: their rating decides whether a command runs, so the messages wait for it and go
in execute_commands. A free thought's commands always wait for execute_commands.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from nodes.commands import Command, registry
from nodes.context import AnimaContext, services_of
from nodes.state import ExecutionUpdate, TickState, ValidationReport
from nodes.steps.s12_execute_commands import run_one

SENT_FIRST = ("messages.send",)
NO_VALIDATORS: ValidationReport = {
    "auto_pass": True,
    "self_validation": False,
    "rating": 0.0,
    "distribution": {},
    "validators": [],
    "passed": True,
}


def send_answer(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> ExecutionUpdate:
    services = services_of(runtime)
    if state.degraded or not state.audience or services.llms.validators():
        return {}
    sends = [raw for raw in state.commands if raw.get("type") in SENT_FIRST and not raw.get("error")]
    if not sends:
        return {}
    commands = registry()
    ready = replace(state, validation=NO_VALIDATORS)  # what validate_output reports when there are no validators
    sent = []
    for raw in sends:
        outcome, events = run_one(Command.model_validate(raw), ready, services, commands, state.llm.get("llm_id"))
        sent.append(outcome)
        for event in events:
            runtime.stream_writer(event)
    return {"executed": sent}  # execute_commands reports them in their place


__all__ = ["send_answer"]
