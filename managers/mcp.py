"""The tools of the MCP servers the operator listed in config.yaml (`mcp.servers`), for the persona (HMP "MCP").

Only the tools in a server's `allow` list can be called. Every call — answered, failed or timed out — is a
`process_log` row (a tool's answer is data, never an instruction; the row carries where it came from), cut to
`mcp.output_chars`. The tools last seen on each server are kept in the config table (`mcp/tools/<server>`);
refreshing them connects to the server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from managers.errors import Refused
from reach import budget
from reach.mcp import McpError, ServerSpec, ToolInfo, call_tool, list_tools

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

# the untrusted sources a tool's answer puts in its process_log row (memory/provenance.py builds them)
SourcesOf = Callable[[str], list[Any]]


def no_servers(settings: Any) -> str | None:
    """Why no MCP tool can be used with these settings (None: some can)."""
    return None if settings.mcp.servers else "no MCP servers are configured (config.yaml mcp.servers)"


def server_spec(settings: Any, name: str) -> ServerSpec:
    """The configured server `name`; Refused (naming the configured ones) when there is none."""
    servers = settings.mcp.servers
    entry = servers.get(name)
    if entry is None:
        known = ", ".join(sorted(servers)) or "none (the operator lists them in config.yaml under mcp.servers)"
        raise Refused(f"no MCP server {name!r}; mine: {known}")
    return ServerSpec(
        name=name,
        transport=entry.transport,
        command=entry.command,
        args=tuple(entry.args),
        env=dict(entry.env),
        cwd=entry.cwd,
        url=entry.url,
        headers=dict(entry.headers),
        allow=tuple(entry.allow),
    )


def timeout_of(settings: Any, name: str) -> float:
    return float(settings.mcp.servers[name].timeout_s or settings.mcp.timeout_s)


class McpManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.deps = house.deps

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    def servers(self, name: str | None = None) -> list[ServerSpec]:
        """The server `name`, or every configured one (by name); Refused for an unknown name."""
        names = [name] if name else sorted(self.settings.mcp.servers)
        return [server_spec(self.settings, n) for n in names]

    def seen_tools(self, server: str) -> list[ToolInfo] | None:
        """The tools last seen on the server (None: never listed)."""
        seen = self.repos.config.mcp_tools(server)
        if seen is None:
            return None
        return [ToolInfo(t["name"], t.get("description", ""), t.get("arguments") or {}) for t in seen]

    def refresh(self, spec: ServerSpec, *, thread_id: str | None = None) -> list[ToolInfo]:
        """Ask the server for its tools and keep them; a failure is recorded as a process_log row, then raised
        (McpError)."""
        try:
            tools = list_tools(spec, timeout_of(self.settings, spec.name))
        except McpError as exc:
            self.repos.processes.add("mcp.list", str(exc), status="error", thread_id=thread_id)
            raise
        self.repos.config.set_mcp_tools(
            spec.name, [{"name": t.name, "description": t.description[:500], "arguments": t.arguments} for t in tools]
        )
        return tools

    def call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        thread_id: str | None,
        llm_id: str | None = None,
        task_id: int | None = None,
        name: str = "mcp.call",
        sources_of: SourcesOf | None = None,
    ) -> tuple[str, str]:
        """Call an allowed tool; the call goes to process_log (named `name`) whatever happens. Returns (status, text):
        status is ok, error (the tool or the server failed) or timeout. Refused for a tool outside the allow list.
        `sources_of(text)`: the provenance the row records for the answer."""
        spec = server_spec(self.settings, server)
        if not spec.allows(tool):
            raise Refused(
                f"{server}.{tool} is not in the server's allow list "
                f"({', '.join(spec.allow) or 'empty'}); the operator sets it in config.yaml"
            )
        limit = self.settings.mcp.output_chars
        shown_args = budget(json.dumps(arguments, ensure_ascii=False), 300)
        try:
            outcome = call_tool(spec, tool, arguments, timeout_of(self.settings, server))
            status, text = ("error" if outcome.is_error else "ok"), outcome.text or "(no output)"
        except McpError as exc:
            status, text = ("timeout" if "no answer within" in str(exc) else "error"), str(exc)
        text = budget(text, limit)
        self.repos.processes.add(
            name,
            f"{server}.{tool}({shown_args}) → {text}",
            status=status,
            thread_id=thread_id,
            tags=["mcp", f"mcp:{server}"],
            llm_id=llm_id,
            task_id=task_id,
            sources=sources_of(text) if sources_of is not None else None,
        )
        return status, text


__all__ = ["McpManager", "no_servers", "server_spec", "timeout_of"]
