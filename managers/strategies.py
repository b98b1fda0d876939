"""Loop-breaking strategies and thinking methods (HMP `stagnation_strategies`, `thinking_methods`): the mechanisms
the anti-stagnation escalation chooses from and the ways of thinking its random iteration draws, as data the
persona lists, extends and prunes. The built-in ones below are seeded on first use; the persona's own strategy is an
instruction with a class (external, context, internal, radical) and a cost, which the escalation places among the
built-in ones (nodes/reflexes/anti_stagnation/escalation.py). Archiving turns one off (restorable)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from managers.errors import Refused
from memory.repositories.stagnation import EscalationFacts

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import StagnationStrategy, ThinkingMethod

# the built-in mechanisms: name -> (class, relative cost)
MECHANISMS: dict[str, tuple[str, int]] = {
    "read_kb": ("external", 1),
    "world_check": ("external", 1),
    "ask_mesh": ("external", 1),
    "ask_human": ("external", 2),
    "random_iteration": ("context", 1),
    "change_context": ("context", 2),
    "task_switch": ("context", 2),
    "simulate": ("context", 3),
    "flashback": ("internal", 1),
    "meta_analysis": ("internal", 1),
    "rationale_reflex": ("internal", 1),
    "interest_memory": ("internal", 2),
    "goal_reformulation": ("internal", 2),
    "switch_llm": ("internal", 3),
    "pause": ("radical", 4),
}
CLASSES = ("external", "context", "internal", "radical")
# HMP's patterns of thought ("Начни с аналогии", "Проверь обратное утверждение", "Сформулируй вопрос для оппонента")
THINKING_METHODS: dict[str, str] = {
    "analogy": "Start with an analogy: what else works like this, and what does that suggest here?",
    "converse": "Check the converse: assume the opposite of what I keep saying and see what follows.",
    "opponent": "Put the question an opponent would ask me, and answer it honestly.",
    "smallest_step": "Find the smallest concrete step I could take next, and describe only that.",
    "first_principles": "Break it down to what I know for certain and build up again from there.",
}


@dataclass(frozen=True)
class EscalationMenu:
    """What the anti-stagnation escalation may choose from: the active strategies by name (the built-in mechanisms
    seeded) and the active thinking methods, as plain rows."""

    strategies: dict[str, Any]
    methods: list[Any]


class StrategyManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    # -- the anti-stagnation escalation ------------------------------------------------------------------------------

    def escalation_menu(self) -> EscalationMenu:
        """The active strategies and thinking methods, the built-in ones seeded first (one query each)."""
        strategies = {r.name: r for r in self.repos.strategies.ensure(MECHANISMS)}
        return EscalationMenu(strategies, list(self.repos.methods.ensure(THINKING_METHODS)))

    def ratings(self) -> dict[str, float]:
        """The persona's own ratings of its strategies (`ratings.add {"subject": "strategy:<name>"}`), by name."""
        return self.repos.records.scores("strategy:")

    def escalation_facts(self, kb_tiers: Iterable[str], flashback_tiers: Iterable[str]) -> EscalationFacts:
        """What the mechanisms' applicability reads of the memory, in one query."""
        return self.repos.stagnation.escalation_facts(kb_tiers, flashback_tiers)

    def draw_method(self, rng: random.Random, methods: list[Any]) -> Any | None:
        """A thinking method drawn at random among `methods` (the least used more likely), counted as used."""
        return self.repos.methods.draw(rng, methods)

    def escalated(self, added: list[str], *, line: str, thread_id: str) -> None:
        """An escalation applied: the mechanisms it added count as used once this episode, and the process log
        says what it diagnosed and applied (`line`)."""
        self.repos.strategies.record(added, used=True)
        self.repos.processes.note("anti_stagnation", line, status="close", thread_id=thread_id)

    def stagnation_ended(self, helped: list[str], *, task_return: str | None, thread_id: str) -> None:
        """Novelty came back: the mechanisms added last count as having helped (the escalation prefers them next
        time), and a task set aside by the task switch is due again (`task_return`: what the process log says)."""
        self.repos.strategies.record(helped, helped=True)
        if task_return:
            self.repos.processes.add("anti_stagnation", task_return, thread_id=thread_id)

    def ensure(self) -> None:
        """The built-in strategies and thinking methods as rows (seeded once; existing rows are left as they are)."""
        self.repos.strategies.ensure(MECHANISMS)
        self.repos.methods.ensure(THINKING_METHODS)

    # -- stagnation strategies ---------------------------------------------------------------------------------------

    def strategies(self, *, include_archived: bool = False) -> list[StagnationStrategy]:
        self.ensure()
        return self.repos.strategies.list(include_archived=include_archived)

    def add_strategy(
        self, *, name: str, instruction: str, mechanism_class: str = "internal", cost: int = 2
    ) -> StagnationStrategy:
        """The persona's own strategy; Refused when the name is taken."""
        if mechanism_class not in CLASSES:
            raise Refused(f"a strategy's class is one of {', '.join(CLASSES)}, not {mechanism_class!r}")
        self.ensure()
        try:
            return self.repos.strategies.add(name, mechanism_class, cost, instruction)
        except ValueError as exc:
            raise Refused(str(exc)) from None

    def find_strategy(self, ref: str | int) -> StagnationStrategy:
        """A strategy by id or name (NotFound)."""
        self.ensure()
        row: StagnationStrategy = self.repos.strategies.find(ref)
        return row

    def archive_strategy(self, ref: str | int) -> StagnationStrategy:
        """The strategy (by id or name) archived; Refused when it is archived already."""
        self.ensure()
        row: StagnationStrategy = self.repos.strategies.find(ref)
        if not self.repos.strategies.archive(row.id):
            raise Refused(f"{row.name} is archived already")
        return row

    # -- thinking methods --------------------------------------------------------------------------------------------

    def methods(self, *, include_archived: bool = False) -> list[ThinkingMethod]:
        self.ensure()
        return self.repos.methods.list(include_archived=include_archived)

    def add_method(self, *, name: str, instruction: str) -> ThinkingMethod:
        """The persona's own thinking method; Refused when the name is taken."""
        self.ensure()
        try:
            return self.repos.methods.add(name, instruction)
        except ValueError as exc:
            raise Refused(str(exc)) from None

    def find_method(self, ref: str | int) -> ThinkingMethod:
        """A thinking method by id or name (NotFound)."""
        self.ensure()
        row: ThinkingMethod = self.repos.methods.find(ref)
        return row

    def archive_method(self, ref: str | int) -> ThinkingMethod:
        """The method (by id or name) archived; Refused when it is archived already."""
        self.ensure()
        row: ThinkingMethod = self.repos.methods.find(ref)
        if not self.repos.methods.archive(row.id):
            raise Refused(f"{row.name} is archived already")
        return row


__all__ = ["CLASSES", "MECHANISMS", "THINKING_METHODS", "EscalationFacts", "EscalationMenu", "StrategyManager"]
