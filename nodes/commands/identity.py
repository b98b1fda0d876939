"""identity, core memory and notepad (HMP `identity`, Nexus Ark core_memory/notepad).

Core memory holds the persona's self-definition, its relationship with the user and its promises; the
notepad holds short-term notes. Both are always in context, edited here, and never saved over their
size limit (the edit fails and says by how much).
"""

from __future__ import annotations

from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandResult, arg, command


def _show(ctx: CommandContext, name: str) -> str:
    block = ctx.repos.blocks.get(name)
    return f"{name} ({len(block.content)}/{block.char_limit} chars):\n{block.content or '(empty)'}"


def _edit(cmd: Command, ctx: CommandContext, name: str) -> CommandResult:
    mode = str(arg(cmd, "mode", default="append"))
    if "old" in cmd.args:
        ctx.repos.blocks.replace(name, str(arg(cmd, "old")), str(arg(cmd, "new", default="")))
    elif mode == "rewrite":
        ctx.repos.blocks.write(name, str(arg(cmd, "text", "content", default="")))
    else:
        ctx.repos.blocks.append(name, str(arg(cmd, "text", "content")))
    block = ctx.repos.blocks.get(name)
    return CommandResult(f"{name} updated ({len(block.content)}/{block.char_limit} chars)")


@command("identity.read", "{}  (my identity file and core memory)")
def read_identity(cmd: Command, ctx: CommandContext) -> CommandResult:
    identity = ctx.services.persona.file("IDENTITY.md").strip() if ctx.services is not None else ""
    return CommandResult(f"{identity}\n\n{_show(ctx, 'core')}".strip(), show=True)


@command("core.read", "{}")
def read_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "core"), show=True)


@command("identity.update", '{"text": "…"}  (appends to core memory; {"old": "…", "new": "…"} replaces)')
@command("core.update", '{"text": "…", "mode": "append|rewrite"}  or  {"old": "…", "new": "…"}')
def update_core(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "core")


@command("notepad.read", "{}")
def read_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(_show(ctx, "notepad"), show=True)


@command("notepad.update", '{"text": "…", "mode": "append|rewrite"}  or  {"old": "…", "new": "…"}')
def update_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _edit(cmd, ctx, "notepad")


@command("notepad.clear", "{}")
def clear_notepad(cmd: Command, ctx: CommandContext) -> CommandResult:
    ctx.repos.blocks.write("notepad", "")
    return CommandResult("notepad cleared")
