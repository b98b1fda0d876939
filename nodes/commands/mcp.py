"""mcp: tools of the MCP servers the operator listed in config.yaml (`mcp.servers`), as JSON commands — so a small
model that cannot do native tool calls still can use them (HMP "MCP", external tools inside the REPL).

`mcp.call` leaves the process: it is `external` and runs only with the validators' consensus, the human's approval
or `consent.auto_approve`. Only the tools in the server's `allow` list can be called. Every call — answered,
failed or timed out — is a `process_log` row (the next prompt shows it, fenced as data: a tool's answer is data,
never an instruction), cut to `mcp.output_chars`. `mcp.list` shows the tools last seen on each server (a `read`);
`{"refresh": true}` connects to ask again, and so is `external`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from nodes import provenance
from nodes.commands.args import Args, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget
from reach.mcp import McpError, ServerSpec, ToolInfo, call_tool, list_tools

FAMILY = Family("mcp", "tools of my MCP servers", compact=True)

ToolName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class McpListArgs(Args):
    server: Word | None = None
    refresh: bool = False


class McpCallArgs(Args):
    server: Word
    tool: ToolName = Field(validation_alias=names("tool", "name"))
    args: dict[str, Any] = Field(default_factory=dict, validation_alias=names("args", "arguments", "input"))


def no_servers(settings: Any) -> str | None:
    return None if settings.mcp.servers else "no MCP servers are configured (config.yaml mcp.servers)"


def server_spec(settings: Any, name: str) -> ServerSpec:
    servers = settings.mcp.servers
    entry = servers.get(name)
    if entry is None:
        known = ", ".join(sorted(servers)) or "none (the operator lists them in config.yaml under mcp.servers)"
        raise CommandError(f"no MCP server {name!r}; mine: {known}")
    return ServerSpec(name=name, transport=entry.transport, command=entry.command, args=tuple(entry.args),
                      env=dict(entry.env), cwd=entry.cwd, url=entry.url, headers=dict(entry.headers),
                      allow=tuple(entry.allow))


def timeout_of(settings: Any, name: str) -> float:
    return float(settings.mcp.servers[name].timeout_s or settings.mcp.timeout_s)


def _remember(ctx: CommandContext, server: str, tools: list[ToolInfo]) -> None:
    ctx.repos.config.set_mcp_tools(server, [{"name": t.name, "description": t.description[:500],
                                                   "arguments": t.arguments} for t in tools])


def _listing(ctx: CommandContext, spec: ServerSpec) -> str:
    seen = ctx.repos.config.mcp_tools(spec.name)
    head = f"{spec.name} ({spec.transport}; allowed: {', '.join(spec.allow) or 'no tool'})"
    if seen is None:
        return f"{head}: tools not listed yet — mcp.list {{\"server\": \"{spec.name}\", \"refresh\": true}}"
    tools = [ToolInfo(t["name"], t.get("description", ""), t.get("arguments") or {}) for t in seen]
    lines = [f"  - {t.line()}{'' if spec.allows(t.name) else ' (not allowed)'}" for t in tools]
    return "\n".join([f"{head}:"] + (lines or ["  (no tools)"]))


@FAMILY.command("mcp.list", '{"server": "files"}  (the tools of my MCP servers; {"refresh": true} asks the server '
                '— that leaves the process)', args=McpListArgs, effect="read",
                escalate=lambda args: "external" if args.get("refresh") else None, unavailable=no_servers)
def list_mcp(cmd: Command, ctx: CommandContext) -> CommandResult:
    names_ = [arg(cmd, "server")] if arg(cmd, "server", default=None) else sorted(ctx.settings.mcp.servers)
    specs = [server_spec(ctx.settings, name) for name in names_]
    if arg(cmd, "refresh", default=False, kind=bool):
        for spec in specs:
            try:
                tools = list_tools(spec, timeout_of(ctx.settings, spec.name))
            except McpError as exc:
                ctx.repos.processes.add("mcp.list", str(exc), status="error", thread_id=ctx.thread_id)
                return CommandResult(str(exc), status="failed")
            _remember(ctx, spec.name, tools)
    return CommandResult(budget("\n".join(_listing(ctx, spec) for spec in specs), ctx.settings.mcp.output_chars),
                         show=True, sources=[provenance.source("tool", f"{spec.name}: its tools' descriptions")
                                             for spec in specs])


def call(ctx: CommandContext, server: str, tool: str, arguments: dict[str, Any], *, name: str = "mcp.call") -> tuple[str, str]:
    """Call an allowed tool; the call goes to process_log whatever happens. Returns (status, text): status is
    ok, error (the tool or the server failed) or timeout."""
    spec = server_spec(ctx.settings, server)
    if not spec.allows(tool):
        raise CommandError(f"{name}: {server}.{tool} is not in the server's allow list "
                           f"({', '.join(spec.allow) or 'empty'}); the operator sets it in config.yaml")
    limit = ctx.settings.mcp.output_chars
    shown_args = budget(json.dumps(arguments, ensure_ascii=False), 300)
    try:
        outcome = call_tool(spec, tool, arguments, timeout_of(ctx.settings, server))
        status, text = ("error" if outcome.is_error else "ok"), outcome.text or "(no output)"
    except McpError as exc:
        status, text = ("timeout" if "no answer within" in str(exc) else "error"), str(exc)
    text = budget(text, limit)
    ctx.repos.processes.add(name, f"{server}.{tool}({shown_args}) → {text}", status=status, thread_id=ctx.thread_id,
                            tags=["mcp", f"mcp:{server}"], llm_id=ctx.llm_id, task_id=ctx.task_id,
                            sources=[provenance.source("tool", f"{server}.{tool}", text)])
    return status, text


@FAMILY.command("mcp.call", '{"server": "files", "tool": "read_file", "args": {"path": "notes.txt"}}  (a tool of an '
                'MCP server; leaves the process: needs approval)', args=McpCallArgs, effect="external",
                unavailable=no_servers)
def call_mcp(cmd: Command, ctx: CommandContext) -> CommandResult:
    status, text = call(ctx, arg(cmd, "server"), arg(cmd, "tool"), dict(cmd.args.get("args") or {}))
    return CommandResult(text, status="executed" if status == "ok" else "failed")
