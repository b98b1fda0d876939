"""The model registry at run time: which model is primary, and each model's priority, enabled and is_validator.

Choices are persisted in the `config` table — `repos.config.selected_llm` (the primary model) and
`repos.config.llm_overrides()` — and applied at once to the registry of the process that made them
(`ManagerDeps.llms`, when it has one) and by every other process at its next tick (nodes/context.py `Services.refresh`). The persona (`llm_registry.select/update`),
the operator (`run.py llm …`) and the web app's Controls page make the same change here. `ask` starts a question
to another model on a background thread (the persona's `llm_task.ask`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from memory.models import ProcessLog, ProcessRun

if TYPE_CHECKING:
    from llm import LLMRegistry
    from managers import Managers

CHANGEABLE = ("priority", "enabled", "is_validator")


class RegistryError(ValueError):
    """A change the registry refuses (no such model, the last enabled one disabled)."""


class ModelRow(TypedDict):
    """A registered model with its persisted choices and its last call."""

    id: str
    provider: str
    model: str
    priority: int
    enabled: bool
    is_validator: bool
    trust_score: float
    selected: bool
    primary: bool
    last_call_ok: bool | None


class ModelManager:
    """The run-time choices of models, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.llms: LLMRegistry | None = house.deps.llms

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The persisted changes, by model id."""
        return self.repos.config.llm_overrides()

    def selected(self) -> str | None:
        """The persisted primary model (None: the highest priority)."""
        return self.repos.config.selected_llm

    def select(self, llm_id: str | None) -> str:
        """Make `llm_id` the primary model (None: back to the highest priority), persisted and applied; what changed.
        RegistryError when it is not an enabled model."""
        repos = self.repos
        rows = {r.id: r for r in repos.llm_registry.all()}
        if llm_id is not None:
            changes = self.overrides()
            row = rows.get(llm_id)
            enabled = changes.get(llm_id, {}).get("enabled", row.enabled if row is not None else False)
            if row is None or not enabled:
                have = ", ".join(i for i, r in rows.items() if changes.get(i, {}).get("enabled", r.enabled))
                raise RegistryError(f"no enabled model {llm_id!r} (enabled: {have})")
        if self.llms is not None:
            self.llms.select(llm_id)
        repos.config.selected_llm = llm_id
        return f"primary model: {llm_id or 'the highest priority'}"

    def update(self, llm_id: str, *, priority: int | None = None, enabled: bool | None = None,
               is_validator: bool | None = None) -> str:
        """Change a model's priority / enabled / is_validator (None: unchanged), persisted and applied; what changed.
        RegistryError when there is no such model or no model would be left enabled."""
        repos = self.repos
        changes: dict[str, Any] = {k: v for k, v in (("priority", priority), ("enabled", enabled),
                                                     ("is_validator", is_validator)) if v is not None}
        registered = repos.llm_registry.all()
        if not any(r.id == llm_id for r in registered):
            raise RegistryError(f"no model {llm_id!r} (have: {', '.join(r.id for r in registered)})")
        persisted = self.overrides()
        merged = {**persisted.get(llm_id, {}), **changes}
        if self.llms is not None:
            try:
                self.llms.apply({llm_id: merged}, repos.config.selected_llm)
            except ValueError as exc:
                raise RegistryError(str(exc)) from None
        else:
            state = {r.id: persisted.get(r.id, {}).get("enabled", r.enabled) for r in registered}
            state[llm_id] = merged.get("enabled", state[llm_id])
            if not any(state.values()):
                raise RegistryError("every LLM of the registry would be disabled: enable another first")
        repos.config.set_llm_override(llm_id, merged)
        repos.llm_registry.upsert(llm_id, **changes)
        if changes.get("enabled") is False and repos.config.selected_llm == llm_id:
            repos.config.selected_llm = None
        return f"{llm_id}: " + ", ".join(f"{k} = {v}" for k, v in changes.items())

    def listing(self, primary: str | None = None) -> list[ModelRow]:
        """Every registered model with its persisted choices and its last call; enabled first, by priority."""
        repos = self.repos
        changes, selected = self.overrides(), self.selected()
        recent = repos.llm_calls.recent(200)
        rows: list[ModelRow] = []
        for r in repos.llm_registry.all():
            mine = changes.get(r.id, {})
            last = next((c for c in reversed(recent) if c.llm_id == r.id), None)
            rows.append(ModelRow(id=r.id, provider=r.provider, model=r.model,
                                 priority=int(mine.get("priority", r.priority)),
                                 enabled=bool(mine.get("enabled", r.enabled)),
                                 is_validator=bool(mine.get("is_validator", r.is_validator)),
                                 trust_score=r.trust_score, selected=r.id == selected, primary=r.id == primary,
                                 last_call_ok=None if last is None else last.ok))
        return sorted(rows, key=lambda row: (not row["enabled"], -row["priority"], row["id"]))

    def ask(self, llm_id: str, question: str, *, max_tokens: int, thread_id: str,
            task_id: int | None = None) -> tuple[ProcessLog, ProcessRun]:
        """A question to another model, as a pending process and its background run (the caller launches the run
        once the transaction commits); RegistryError when the model is not enabled here."""
        if self.llms is not None and llm_id not in self.llms.ids:
            raise RegistryError(f"no enabled model {llm_id!r} (have: {', '.join(self.llms.ids)})")
        row = self.repos.processes.add("llm_task", f"asked {llm_id}: {question[:200]}", status="pending",
                                       thread_id=thread_id, tags=["background", "llm_task"], llm_id=llm_id,
                                       task_id=task_id)
        run = self.repos.runs.add(row.id, "llm_task", thread_id=thread_id,
                                  spec={"llm": llm_id, "question": question, "max_tokens": max_tokens})
        return row, run
