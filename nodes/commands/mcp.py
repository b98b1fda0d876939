"""mcp: tools of the MCP servers the operator listed in config.yaml (`mcp.servers`), as JSON commands — so a small
model that cannot do native tool calls still can use them (HMP "MCP", external tools inside the REPL).

`mcp.call` leaves the process: it is `external` and runs only with the validators' consensus, the human's approval
or `consent.auto_approve`. Only the tools in the server's `allow` list can be called. Every call — answered,
failed or timed out — is a `process_log` row (the next prompt shows it, fenced as data: a tool's answer is data,
never an instruction), cut to `mcp.output_chars`. `mcp.list` shows the tools last seen on each server (a `read`);
`{"refresh": true}` connects to ask again, and so is `external`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from managers.errors import Refused
from managers.mcp import no_servers, server_spec, timeout_of
from memory import provenance
from nodes.commands.args import Args, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget
from reach.mcp import McpError, ServerSpec, ToolInfo

FAMILY = Family("mcp", "tools of my MCP servers", compact=True)
__all__ = ["FAMILY", "call", "no_servers", "server_spec", "timeout_of"]  # managers/mcp.py's, re-exported

ToolName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class McpListArgs(Args):
    server: Word | None = None
    refresh: bool = False


class McpCallArgs(Args):
    server: Word
    tool: ToolName = Field(validation_alias=names("tool", "name"))
    args: dict[str, Any] = Field(default_factory=dict, validation_alias=names("args", "arguments", "input"))


def _listing(spec: ServerSpec, seen: list[ToolInfo] | None) -> str:
    head = f"{spec.name} ({spec.transport}; allowed: {', '.join(spec.allow) or 'no tool'})"
    if seen is None:
        return f'{head}: tools not listed yet — mcp.list {{"server": "{spec.name}", "refresh": true}}'
    lines = [f"  - {t.line()}{'' if spec.allows(t.name) else ' (not allowed)'}" for t in seen]
    return "\n".join([f"{head}:"] + (lines or ["  (no tools)"]))


@FAMILY.command(
    "mcp.list",
    '{"server": "files"}  (the tools of my MCP servers; {"refresh": true} asks the server — that leaves the process)',
    args=McpListArgs,
    effect="read",
    escalate=lambda args: "external" if args.get("refresh") else None,
    unavailable=no_servers,
)
def list_mcp(cmd: Command, ctx: CommandContext) -> CommandResult:
    mcp = ctx.managers.mcp
    specs = mcp.servers(arg(cmd, "server", default=None))
    if arg(cmd, "refresh", default=False, kind=bool):
        for spec in specs:
            try:
                mcp.refresh(spec, thread_id=ctx.thread_id)
            except McpError as exc:
                return CommandResult(str(exc), status="failed")
    return CommandResult(
        budget("\n".join(_listing(spec, mcp.seen_tools(spec.name)) for spec in specs), ctx.settings.mcp.output_chars),
        show=True,
        sources=[provenance.source("tool", f"{spec.name}: its tools' descriptions") for spec in specs],
    )


def call(
    ctx: CommandContext, server: str, tool: str, arguments: dict[str, Any], *, name: str = "mcp.call"
) -> tuple[str, str]:
    """Call an allowed tool (managers/mcp.py); the call goes to process_log whatever happens. Returns (status, text):
    status is ok, error (the tool or the server failed) or timeout."""
    ctx.managers.mcp.servers(server)  # an unknown server: refused as it is
    try:
        return ctx.managers.mcp.call(
            server=server,
            tool=tool,
            arguments=arguments,
            thread_id=ctx.thread_id,
            llm_id=ctx.llm_id,
            task_id=ctx.task_id,
            name=name,
            sources_of=lambda text: [provenance.source("tool", f"{server}.{tool}", text)],
        )
    except Refused as exc:
        raise CommandError(f"{name}: {exc}") from None


@FAMILY.command(
    "mcp.call",
    '{"server": "files", "tool": "read_file", "args": {"path": "notes.txt"}}  (a tool of an '
    "MCP server; leaves the process: needs approval)",
    args=McpCallArgs,
    effect="external",
    unavailable=no_servers,
)
def call_mcp(cmd: Command, ctx: CommandContext) -> CommandResult:
    status, text = call(ctx, arg(cmd, "server"), arg(cmd, "tool"), dict(cmd.args.get("args") or {}))
    return CommandResult(text, status="executed" if status == "ok" else "failed")
