"""identity, core memory and notepad (HMP `identity`, Nexus Ark core_memory/notepad).

Core memory holds the persona's self-definition, its relationship with the user and its promises; the
notepad holds short-term notes. Both are always in context, edited here, and never saved over their
size limit (the edit fails and says by how much). The blocks' rules are the identity manager's (managers/identity.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from managers.identity import BlockName
from nodes.commands.args import Args, OptionalText, Text, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Effect, Family, arg

FAMILY = Family("identity", "identity, core memory and notepad")


class BlockEditArgs(Args):
    text: OptionalText | None = Field(None, validation_alias=names("text", "content"))
    mode: Annotated[Literal["append", "rewrite"], lowered] = "append"
    old: Text | None = None
    new: OptionalText | None = None

    @model_validator(mode="after")
    def _something(self) -> BlockEditArgs:
        if self.old is None and self.mode == "append" and not self.text:
            raise ValueError("give text to append, text with mode rewrite, or old and new")
        return self


def _show(ctx: CommandContext, name: BlockName) -> str:
    return ctx.managers.identity.show(name)


def discards(args: dict[str, Any]) -> Effect | None:
    """A rewrite or a replacement discards what was there: that changes the persona (modify_self)."""
    return "modify_self" if "old" in args or str(args.get("mode") or "").strip().lower() == "rewrite" else None


def _edit(cmd: Command, ctx: CommandContext, name: BlockName) -> CommandResult:
    identity = ctx.managers.identity
    if "old" in cmd.args:
        edit = identity.edit(name, old=str(arg(cmd, "old")), new=str(arg(cmd, "new", default="")))
    elif str(arg(cmd, "mode", default="append")).strip().lower() == "rewrite":
        edit = identity.edit(name, mode="rewrite", text=str(arg(cmd, "text", default="")))
    else:
        edit = identity.edit(name, text=str(arg(cmd, "text")))
    return CommandResult(f"{name} updated ({edit.chars}/{edit.limit} chars){edit.undo}")


@FAMILY.command("identity.read", "{}  (my identity file and core memory)", effect="read")
def read_identity(cmd: Command, ctx: CommandContext) -> CommandResult:
    identity = ctx.services.persona.file("IDENTITY.md").strip() if ctx.services is not None else ""
    return CommandResult(f"{identity}\n\n{_show(ctx, 'core')}".strip(), show=True)


@FAMILY.command("core.read", "{}", effect="read")
def read_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "core"), show=True)


# one handler, two specs: the gate reads each spec's own effect (identity.update is always modify_self)
@FAMILY.command(
    "identity.update",
    '{"text": "…"}  (changes who I am: appends to core memory, or {"old": "…", "new": "…"} '
    "replaces; needs my human's approval)",
    args=BlockEditArgs,
    effect="modify_self",
    prompt_tier="core memory",
)
@FAMILY.command(
    "core.update",
    '{"text": "…"}  appends;  {"text": "…", "mode": "rewrite"} or {"old": "…", "new": "…"} '
    "(rewrites need my human's approval)",
    args=BlockEditArgs,
    effect="write_self",
    escalate=discards,
    prompt_tier="core memory",
)
def update_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "core")


@FAMILY.command("notepad.read", "{}", effect="read")
def read_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "notepad"), show=True)


@FAMILY.command(
    "notepad.update",
    '{"text": "…"}  appends;  {"text": "…", "mode": "rewrite"} or {"old": "…", "new": "…"} '
    "(rewrites need my human's approval)",
    args=BlockEditArgs,
    effect="write_self",
    escalate=discards,
    prompt_tier="notepad",
)
def update_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "notepad")


@FAMILY.command("notepad.clear", "{}  (needs my human's approval)", effect="modify_self")
def clear_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult("notepad cleared" + ctx.managers.identity.clear("notepad").undo)
