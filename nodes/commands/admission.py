"""What of a parsed output may go on to the consent gate: known types with valid arguments, within the tick's caps.

Runs where commands are extracted, so nothing unvalidated ever reaches the tick state, its checkpoint or a handler.
An unknown type or bad arguments becomes a refused command (recorded, its error shown to the model next tick, its
raw arguments dropped); commands past `limits.commands_per_tick`, and Stelis starts past
`limits.stelis_starts_per_tick`, are dropped with one line saying how many and which.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nodes.commands.args import ArgsError
from nodes.commands.model import Command
from nodes.state import CommandDict

if TYPE_CHECKING:
    from nodes.commands import Registry
    from persona.settings import LimitsSettings


@dataclass
class Admission:
    commands: list[CommandDict] = field(default_factory=list)  # valid ones carry checked args; refused ones `error`
    notes: list[str] = field(default_factory=list)  # what was dropped, for the model


def admit(parsed: list[Command], registry: Registry, limits: LimitsSettings) -> Admission:
    admission = Admission()
    dropped: Counter[str] = Counter()
    starts = 0
    for cmd in parsed:
        if len(admission.commands) >= limits.commands_per_tick:
            dropped[cmd.type[:60]] += 1
            continue
        entry: CommandDict = {
            "cmd_id": cmd.cmd_id[:80],
            "type": cmd.type[:80],
            "args": {},
            "description": cmd.description[:500],
            "syntax": cmd.syntax,
        }
        spec = registry.get(cmd.type)
        if spec is None:
            entry["error"] = f"unknown command type {cmd.type[:80]!r}; see help.show"
            entry["status"] = "unknown"
        else:
            try:
                entry["args"] = spec.check(cmd.args)
            except ArgsError as exc:
                entry["error"], entry["status"] = str(exc), "invalid"
        if spec is not None and spec.type == "stelis.start" and "error" not in entry:
            starts += 1
            if starts > limits.stelis_starts_per_tick:
                dropped["stelis.start"] += 1
                continue
        admission.commands.append(entry)
    if dropped:
        which = ", ".join(f"{t} ×{n}" for t, n in dropped.most_common(5))
        admission.notes.append(
            f"dropped {sum(dropped.values())} command(s) over this tick's limits ({limits.commands_per_tick} commands, "
            f"{limits.stelis_starts_per_tick} stelis.start): {which}"
        )
    return admission
