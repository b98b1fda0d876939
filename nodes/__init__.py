"""The steps of the tick and of the other playbooks. The compiler finds them through `STEPS`; a step never
imports the compiler.

    steps/      the REPL tick, one module per step, in tick order (s01 … s12)
    reflexes/   emotion, anti-stagnation (novelty, escalation), validation, self-assessment
    commands/   the command families, the parser and the consent gate
    stelis/     child threads: lifecycle, playbook regions, history and anchors, chronicles
    kinds/      the playbook node kinds llm, set, subplaybook (and their templates and expressions)
    dreaming.py the dream playbook's steps; upkeep.py memory upkeep shared by the tick and the dream
"""

from __future__ import annotations

from typing import Callable

from nodes.context import AnimaContext, Services
from nodes.dreaming import apply_dream, dream, gather_dream, summarise_days
from nodes.state import TickState
from nodes.steps import TICK_STEPS

STEPS: dict[str, Callable] = {
    **TICK_STEPS,
    "gather_dream": gather_dream,
    "dream": dream,
    "apply_dream": apply_dream,
    "summarise_days": summarise_days,
}

__all__ = ["STEPS", "AnimaContext", "Services", "TickState"]
