"""llm_registry and llm_task (HMP "Утилиты": `llm_registry list/select/update`; "постановка задачи другой LLM" in
question-and-answer mode).

Run-time choices are the model manager's (managers/models.py): persisted, applied to the run's registry at once and
by every other process at its next tick, so the persona (`llm_registry.select`; `update` needs consent: it changes
who thinks and who judges), the operator (`run.py llm …`) and the web app's Controls page make the same change.
`llm_task` asks another registered model a question on a background thread (nodes/background.py); the answer arrives
as a note (source `llm_task`), fenced as data like every note.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from managers.models import ModelRow, RegistryError
from nodes.commands.args import Args, Text, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family(
    "llm_registry",
    "the models I can think with",
    compact=True,
    abouts={
        "llm_registry": "the models I can think with",
        "llm_task": "another model answers my question in the background",
    },
)

LlmId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class SelectArgs(Args):
    id: LlmId = Field(validation_alias=names("id", "llm", "llm_id", "model"))


class UpdateArgs(SelectArgs):
    priority: int | None = Field(None, ge=-1000, le=1000)
    enabled: bool | None = None
    is_validator: bool | None = Field(None, validation_alias=names("is_validator", "validator"))

    @model_validator(mode="after")
    def _something(self) -> UpdateArgs:
        if self.priority is None and self.enabled is None and self.is_validator is None:
            raise ValueError("give priority, enabled or is_validator")
        return self


class TaskArgs(Args):
    question: Text = Field(validation_alias=names("question", "task_description", "task", "text", "prompt"))
    llm: LlmId = Field(validation_alias=names("llm", "target_llm", "llm_id", "model"))
    max_tokens: int = Field(512, ge=16, le=8192)


def _line(row: ModelRow) -> str:
    flags = [
        f
        for f, on in (
            ("primary", row["primary"]),
            ("selected", row["selected"]),
            ("validator", row["is_validator"]),
            ("disabled", not row["enabled"]),
        )
        if on
    ]
    health = {None: "not called yet", True: "last call ok", False: "last call failed"}[row["last_call_ok"]]
    model = f" {row['model']}" if row["model"] else ""
    return (
        f"- {row['id']} ({row['provider']}{model}), priority {row['priority']}, trust {row['trust_score']:.2f}"
        f"{' [' + ', '.join(flags) + ']' if flags else ''}; {health}"
    )


@FAMILY.command(
    "llm_registry.list", "{}  (the models I can think with, which one is primary, their health)", effect="read"
)
def list_llms(cmd: Command, ctx: CommandContext) -> CommandResult:
    primary = ctx.services.llms.primary_id if ctx.services is not None else None
    return CommandResult("\n".join(_line(r) for r in ctx.managers.models.listing(primary)), show=True)


@FAMILY.command(
    "llm_registry.select",
    '{"id": "server"}  (think with this model from now on; the others stay as fallbacks)',
    args=SelectArgs,
    effect="write_self",
)
def select_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        return CommandResult(ctx.managers.models.select(arg(cmd, "id")))
    except RegistryError as exc:
        raise CommandError(f"llm_registry.select: {exc}") from None


@FAMILY.command(
    "llm_registry.update",
    '{"id": "server", "priority": 50, "enabled": true, "is_validator": false}  '
    "(changes who thinks and who judges; needs my human's approval)",
    args=UpdateArgs,
    effect="modify_self",
)
def update_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        return CommandResult(
            ctx.managers.models.update(
                arg(cmd, "id"),
                priority=cmd.args.get("priority"),
                enabled=cmd.args.get("enabled"),
                is_validator=cmd.args.get("is_validator"),
            )
        )
    except RegistryError as exc:
        raise CommandError(f"llm_registry.update: {exc}") from None


@FAMILY.command(
    "llm_task.ask",
    '{"llm": "server", "question": "…"}  (another model answers in the background; the answer arrives as a note)',
    args=TaskArgs,
    effect="write_self",
    aliases=("llm_task",),
)
def ask_llm(cmd: Command, ctx: CommandContext) -> CommandResult:
    llm_id, question = arg(cmd, "llm"), str(arg(cmd, "question"))
    try:
        row, run = ctx.managers.models.ask(
            llm_id,
            question,
            max_tokens=arg(cmd, "max_tokens", default=512),
            thread_id=ctx.thread_id,
            task_id=ctx.task_id,
        )
    except RegistryError as exc:
        raise CommandError(f"llm_task: {exc}") from None
    background = ctx.services.background()
    ctx.then(lambda: background.launch(run.id))
    return CommandResult(f"process {row.id}: {llm_id} is asked; its answer will arrive as a note")
