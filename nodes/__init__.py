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

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodes.context import AnimaContext, Services
    from nodes.state import TickState

    STEPS: dict[str, Callable[..., Any]]

_WHERE = {"AnimaContext": "nodes.context", "Services": "nodes.context", "TickState": "nodes.state"}


@cache
def _steps() -> dict[str, Callable[..., Any]]:
    from nodes.dreaming import apply_dream, dream, gather_dream, summarise_days
    from nodes.steps import TICK_STEPS

    return {
        **TICK_STEPS,
        "gather_dream": gather_dream,
        "dream": dream,
        "apply_dream": apply_dream,
        "summarise_days": summarise_days,
    }


def __getattr__(name: str) -> Any:
    """The names below, imported on first use (PEP 562): `nodes.context` (a command's clock, the services' types)
    does not load every step, LangGraph with them."""
    if name == "STEPS":
        return _steps()
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'nodes' has no attribute {name!r}")


__all__ = ["STEPS", "AnimaContext", "Services", "TickState"]
