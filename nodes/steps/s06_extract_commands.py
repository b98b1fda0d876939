"""Step 6 (HMP): commands from the output in any of the three syntaxes, admitted only with valid arguments and within
the tick's caps (nodes/commands/admission.py), plus the model's own reliability marks (confidence tags, the
UnverifiedFacts block, the Confidence line: nodes/reflexes/self_assessment.py).

In continuation mode an answer to a human turn is itself the reply: when the human wrote this tick and
the model sent no explicit message, the first paragraph of the continuation becomes `messages.send`.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.commands import parse_commands, registry
from nodes.commands.admission import admit
from nodes.commands.args import MAX_TEXT
from nodes.context import AnimaContext, services_of
from nodes.reflexes.self_assessment import parse_self_assessment
from nodes.state import CommandDict, CommandsUpdate, TickState


def extract_commands(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> CommandsUpdate:
    commands_registry = registry()
    parsed = parse_commands(state.response, state.tick, state.native_tool_calls, commands_registry.aliases)
    admission = admit(parsed.commands, commands_registry, services_of(runtime).settings.limits)
    commands: list[CommandDict] = admission.commands
    if (
        state.mode == "continuation"
        and state.incoming_note_ids
        and not any(c["type"] == "messages.send" for c in commands)
    ):
        reply = parsed.body.strip().split("\n\n")[0].strip()
        if reply:
            commands.append(
                {
                    "cmd_id": f"t{state.tick}-reply",
                    "type": "messages.send",
                    "args": {"text": reply[:MAX_TEXT]},
                    "description": "answer from inside the stream",
                    "syntax": "continuation",
                }
            )
    assessment = parse_self_assessment(parsed.body)
    return {
        "thought": assessment.body,
        "commands": commands,
        "parse_errors": state.parse_errors + parsed.errors + admission.notes + assessment.errors,
        "confidence": assessment.confidence,
        "unverified_facts": assessment.facts,
        "self_emotions": assessment.emotions,
    }
