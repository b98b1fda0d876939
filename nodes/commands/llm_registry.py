"""llm_registry and llm_task (HMP "Утилиты": `llm_registry list/select/update`; "постановка задачи другой LLM" in
question-and-answer mode).

Run-time choices are persisted in the `config` table — `llm/selected` (the primary model) and `llm/overrides/<id>`
(priority, enabled, is_validator) — and applied to the run's registry at once and by every other process at its
next tick (nodes/context.py `Services.refresh`), so the persona (`llm_registry.select`; `update` needs consent:
it changes who thinks and who judges), the operator (`run.py llm …`) and the web app's Controls page make the same
change. `llm_task` asks another registered model a question on a background thread (nodes/background.py); the
answer arrives as a note (source `llm_task`), fenced as data like every note.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from memory import Repos
from nodes.commands.args import Args, Text, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("llm_registry", "the models I can think with",
                compact=True, abouts={"llm_registry": "the models I can think with", "llm_task": "another model answers my question in the background"})
CHANGEABLE = ("priority", "enabled", "is_validator")

LlmId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class SelectArgs(Args):
    id: LlmId = Field(validation_alias=names("id", "llm", "llm_id", "model"))


class UpdateArgs(SelectArgs):
    priority: int | None = Field(None, ge=-1000, le=1000)
    enabled: bool | None = None
    is_validator: bool | None = Field(None, validation_alias=names("is_validator", "validator"))

    @model_validator(mode="after")
    def _something(self) -> "UpdateArgs":
        if self.priority is None and self.enabled is None and self.is_validator is None:
            raise ValueError("give priority, enabled or is_validator")
        return self


class TaskArgs(Args):
    question: Text = Field(validation_alias=names("question", "task_description", "task", "text", "prompt"))
    llm: LlmId = Field(validation_alias=names("llm", "target_llm", "llm_id", "model"))
    max_tokens: int = Field(512, ge=16, le=8192)


class RegistryError(ValueError):
    """A change the registry refuses (no such model, the last enabled one disabled)."""


def overrides(repos: Repos) -> dict[str, dict[str, Any]]:
    return repos.config.llm_overrides()


def choices(repos: Repos) -> tuple[dict[str, dict[str, Any]], str | None]:
    """(overrides by model id, the selected model) as persisted."""
    return overrides(repos), repos.config.selected_llm


def select(repos: Repos, llms: Any | None, llm_id: str | None) -> str:
    """Make `llm_id` the primary model (None: back to the highest priority), persisted; applied to `llms` if given."""
    rows = {r.id: r for r in repos.llm_registry.all()}
    if llm_id is not None:
        row = rows.get(llm_id)
        enabled = overrides(repos).get(llm_id, {}).get("enabled", row.enabled if row is not None else False)
        if row is None or not enabled:
            have = ", ".join(i for i, r in rows.items() if overrides(repos).get(i, {}).get("enabled", r.enabled))
            raise RegistryError(f"no enabled model {llm_id!r} (enabled: {have})")
    if llms is not None:
        llms.select(llm_id)
    repos.config.selected_llm = llm_id
    return f"primary model: {llm_id or 'the highest priority'}"


def update(repos: Repos, llms: Any | None, llm_id: str, **changes: Any) -> str:
    """Change a model's priority / enabled / is_validator, persisted; refused if it would leave none enabled."""
    changes = {k: v for k, v in changes.items() if k in CHANGEABLE and v is not None}
    row = next((r for r in repos.llm_registry.all() if r.id == llm_id), None)
    if row is None:
        raise RegistryError(f"no model {llm_id!r} (have: {', '.join(r.id for r in repos.llm_registry.all())})")
    merged = {**overrides(repos).get(llm_id, {}), **changes}
    if llms is not None:
        try:
            llms.apply({llm_id: merged}, repos.config.selected_llm)
        except ValueError as exc:
            raise RegistryError(str(exc)) from None
    else:
        state = {r.id: overrides(repos).get(r.id, {}).get("enabled", r.enabled) for r in repos.llm_registry.all()}
        state[llm_id] = merged.get("enabled", state[llm_id])
        if not any(state.values()):
            raise RegistryError("every LLM of the registry would be disabled: enable another first")
    repos.config.set_llm_override(llm_id, merged)
    repos.llm_registry.upsert(llm_id, **changes)
    if changes.get("enabled") is False and repos.config.selected_llm == llm_id:
        repos.config.selected_llm = None
    return f"{llm_id}: " + ", ".join(f"{k} = {v}" for k, v in changes.items())


def listing(repos: Repos, primary: str | None = None) -> list[dict[str, Any]]:
    """Every registered model with its persisted choices and its last call."""
    changes, selected = choices(repos)
    recent = repos.llm_calls.recent(200)
    rows = []
    for r in repos.llm_registry.all():
        mine = changes.get(r.id, {})
        last = next((c for c in reversed(recent) if c.llm_id == r.id), None)
        rows.append({"id": r.id, "provider": r.provider, "model": r.model,
                     "priority": int(mine.get("priority", r.priority)), "enabled": bool(mine.get("enabled", r.enabled)),
                     "is_validator": bool(mine.get("is_validator", r.is_validator)), "trust_score": r.trust_score,
                     "selected": r.id == selected, "primary": r.id == primary,
                     "last_call_ok": None if last is None else last.ok})
    return sorted(rows, key=lambda row: (not row["enabled"], -row["priority"], row["id"]))


def _line(row: dict[str, Any]) -> str:
    flags = [f for f, on in (("primary", row["primary"]), ("selected", row["selected"]), ("validator", row["is_validator"]),
                             ("disabled", not row["enabled"])) if on]
    health = {None: "not called yet", True: "last call ok", False: "last call failed"}[row["last_call_ok"]]
    model = f" {row['model']}" if row["model"] else ""
    return (f"- {row['id']} ({row['provider']}{model}), priority {row['priority']}, trust {row['trust_score']:.2f}"
            f"{' [' + ', '.join(flags) + ']' if flags else ''}; {health}")


@FAMILY.command("llm_registry.list", "{}  (the models I can think with, which one is primary, their health)",
                effect="read")
def list_llms(cmd: Command, ctx: CommandContext) -> CommandResult:
    primary = ctx.services.llms.primary_id if ctx.services is not None else None
    return CommandResult("\n".join(_line(r) for r in listing(ctx.repos, primary)), show=True)


@FAMILY.command("llm_registry.select", '{"id": "server"}  (think with this model from now on; the others stay as '
                'fallbacks)', args=SelectArgs, effect="write_self")
def select_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        return CommandResult(select(ctx.repos, ctx.services.llms, arg(cmd, "id")))
    except RegistryError as exc:
        raise CommandError(f"llm_registry.select: {exc}") from None


@FAMILY.command("llm_registry.update", '{"id": "server", "priority": 50, "enabled": true, "is_validator": false}  '
                "(changes who thinks and who judges; needs my human's approval)", args=UpdateArgs, effect="modify_self")
def update_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        return CommandResult(update(ctx.repos, ctx.services.llms, arg(cmd, "id"),
                                    **{k: cmd.args.get(k) for k in CHANGEABLE}))
    except RegistryError as exc:
        raise CommandError(f"llm_registry.update: {exc}") from None


@FAMILY.command("llm_task.ask", '{"llm": "server", "question": "…"}  (another model answers in the background; '
                "the answer arrives as a note)", args=TaskArgs, effect="write_self", aliases=("llm_task",))
def ask_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    llm_id, question = arg(cmd, "llm"), str(arg(cmd, "question"))
    if llm_id not in ctx.services.llms.ids:
        raise CommandError(f"llm_task: no enabled model {llm_id!r} (have: {', '.join(ctx.services.llms.ids)})")
    row = ctx.repos.processes.add("llm_task", f"asked {llm_id}: {question[:200]}", status="pending",
                                  thread_id=ctx.thread_id, tags=["background", "llm_task"], llm_id=llm_id,
                                  task_id=ctx.task_id)
    run = ctx.repos.runs.add(row.id, "llm_task", thread_id=ctx.thread_id,
                             spec={"llm": llm_id, "question": question, "max_tokens": arg(cmd, "max_tokens", default=512)})
    background = ctx.services.background()
    ctx.then(lambda: background.launch(run.id))
    return CommandResult(f"process {row.id}: {llm_id} is asked; its answer will arrive as a note")
