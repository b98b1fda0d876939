"""identity, core memory and notepad (HMP `identity`, Nexus Ark core_memory/notepad).

Core memory holds the persona's self-definition, its relationship with the user and its promises; the
notepad holds short-term notes. Both are always in context, edited here, and never saved over their
size limit (the edit fails and says by how much).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

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
    def _something(self) -> "BlockEditArgs":
        if self.old is None and self.mode == "append" and not self.text:
            raise ValueError("give text to append, text with mode rewrite, or old and new")
        return self


def _show(ctx: CommandContext, name: str) -> str:
    block = ctx.repos.blocks.get(name)
    return f"{name} ({len(block.content)}/{block.char_limit} chars):\n{block.content or '(empty)'}"


def discards(args: dict) -> Effect | None:
    """A rewrite or a replacement discards what was there: that changes the persona (modify_self)."""
    return "modify_self" if "old" in args or str(args.get("mode") or "").strip().lower() == "rewrite" else None


def _edit(cmd: Command, ctx: CommandContext, name: str) -> CommandResult:
    mode = str(arg(cmd, "mode", default="append")).strip().lower()
    before = ctx.repos.blocks.get(name).content
    if "old" in cmd.args:
        ctx.repos.blocks.replace(name, str(arg(cmd, "old")), str(arg(cmd, "new", default="")))
    elif mode == "rewrite":
        ctx.repos.blocks.write(name, str(arg(cmd, "text", default="")))
    else:
        ctx.repos.blocks.append(name, str(arg(cmd, "text")))
    block = ctx.repos.blocks.get(name)
    return CommandResult(f"{name} updated ({len(block.content)}/{block.char_limit} chars)" + _undo(ctx, name, before))


def _undo(ctx: CommandContext, name: str, before: str) -> str:
    """How to get back what a rewrite, replacement or clear discarded (kept as a version)."""
    version = ctx.repos.blocks.latest_version(name)
    if not before or version is None or version.content != before:
        return ""
    return f'; memory.restore {{"tier": "{name}", "ref": "{version.id}"}} brings the old text back'


@FAMILY.command("identity.read", "{}  (my identity file and core memory)", effect="read")
def read_identity(cmd: Command, ctx: CommandContext) -> CommandResult:
    identity = ctx.services.persona.file("IDENTITY.md").strip() if ctx.services is not None else ""
    return CommandResult(f"{identity}\n\n{_show(ctx, 'core')}".strip(), show=True)


@FAMILY.command("core.read", "{}", effect="read")
def read_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "core"), show=True)


# one handler, two specs: the gate reads each spec's own effect (identity.update is always modify_self)
@FAMILY.command("identity.update", '{"text": "…"}  (changes who I am: appends to core memory, or {"old": "…", "new": "…"} '
                                   "replaces; needs my human's approval)", args=BlockEditArgs, effect="modify_self",
                prompt_tier="core memory")
@FAMILY.command("core.update", '{"text": "…"}  appends;  {"text": "…", "mode": "rewrite"} or {"old": "…", "new": "…"} '
                               "(rewrites need my human's approval)", args=BlockEditArgs, effect="write_self", escalate=discards,
                prompt_tier="core memory")
def update_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "core")


@FAMILY.command("notepad.read", "{}", effect="read")
def read_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "notepad"), show=True)


@FAMILY.command("notepad.update", '{"text": "…"}  appends;  {"text": "…", "mode": "rewrite"} or {"old": "…", "new": "…"} '
                                  "(rewrites need my human's approval)", args=BlockEditArgs, effect="write_self", escalate=discards,
                prompt_tier="notepad")
def update_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "notepad")


@FAMILY.command("notepad.clear", "{}  (needs my human's approval)", effect="modify_self")
def clear_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    before = ctx.repos.blocks.get("notepad").content
    ctx.repos.blocks.write("notepad", "")
    return CommandResult("notepad cleared" + _undo(ctx, "notepad", before))
