"""MCP servers as tools, through the `mcp` SDK and `langchain-mcp-adapters`: list a server's tools and call one.

A server is a `ServerSpec` (stdio: a command the SDK starts with only its safe default environment plus what the
spec names; or streamable HTTP: a URL). Each call opens a session, does its work and closes it — a stdio server
lives only as long as the call — and the whole call is bounded by a timeout. Tool results are turned into plain
text (images and files become one line naming them); an error the tool reports is a result with `is_error`,
a transport failure or timeout is an `McpError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from reach.run_async import ReachTimeout, run_with_timeout

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain_core.tools import BaseTool
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.sessions import Connection, StreamableHttpConnection

    ToolLoader = Callable[..., Awaitable[list[BaseTool]]]  # langchain_mcp_adapters.tools.load_mcp_tools


class McpError(RuntimeError):
    """The server could not be reached, failed, or did not answer in time; the message says which."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    transport: str  # stdio | http
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] = ()  # tool names or patterns (fnmatch); "*" allows every tool

    def allows(self, tool: str) -> bool:
        return any(fnmatchcase(tool, pattern) for pattern in self.allow)

    def connection(self) -> Connection:
        """The adapters' connection (a StdioConnection or a StreamableHttpConnection; the settings give a stdio
        server its command and an http one its url)."""
        if self.transport == "stdio":
            assert self.command is not None
            return {
                "transport": "stdio",
                "command": self.command,
                "args": list(self.args),
                "env": dict(self.env) or None,
                "cwd": self.cwd,
            }
        assert self.url is not None
        http: StreamableHttpConnection = {"transport": "streamable_http", "url": self.url}
        if self.headers:
            http["headers"] = dict(self.headers)
        return http


@dataclass
class ToolInfo:
    name: str
    description: str
    arguments: dict[str, Any]  # the tool's input JSON Schema

    def line(self) -> str:
        props = self.arguments.get("properties") or {}
        required = set(self.arguments.get("required") or [])
        args = ", ".join(
            f"{name}{'*' if name in required else ''}: {spec.get('type', 'any')}" for name, spec in props.items()
        )
        return f"{self.name}({args}) — {' '.join(self.description.split())[:300]}"


@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _failure(server: ServerSpec, exc: BaseException) -> McpError:
    leaf = _leaf(exc)
    if isinstance(leaf, ReachTimeout):
        return McpError(str(leaf))
    what = f"{type(leaf).__name__}: {leaf}".strip().rstrip(":")
    where = server.command if server.transport == "stdio" else server.url
    return McpError(f"MCP server {server.name} ({where}) failed: {what}"[:1000])


async def _tools(server: ServerSpec) -> tuple[MultiServerMCPClient, ToolLoader]:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    client = MultiServerMCPClient({server.name: server.connection()})
    return client, load_mcp_tools


def _arguments_schema(tool: BaseTool) -> dict[str, Any]:
    """The tool's arguments as JSON Schema (an MCP tool's is JSON Schema already)."""
    from pydantic import BaseModel

    schema = tool.args_schema
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    raise McpError(f"tool {tool.name} has no arguments schema")


def list_tools(server: ServerSpec, timeout_s: float) -> list[ToolInfo]:
    async def go() -> list[ToolInfo]:
        client, load = await _tools(server)
        async with client.session(server.name) as session:
            tools = await load(session, server_name=server.name)
        return [ToolInfo(t.name, t.description or "", _arguments_schema(t)) for t in tools]

    try:
        return run_with_timeout(go, timeout_s, f"MCP server {server.name}: listing its tools")
    except Exception as exc:  # noqa: BLE001 - every failure is one readable error
        raise _failure(server, exc) from None


def _text_of(content: Any, artifact: Any) -> str:
    if isinstance(content, str):
        parts = [content]
    else:
        parts = []
        for block in content or []:
            if isinstance(block, str):
                parts.append(block)
            elif block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(f"[{block.get('type')} {block.get('mime_type') or ''} {block.get('url') or ''}]".strip())
    text = "\n".join(p for p in parts if p)
    structured = (artifact or {}).get("structured_content") if isinstance(artifact, dict) else None
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    return text


def call_tool(server: ServerSpec, tool: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutcome:
    """Call `tool` on `server`; the tool's own error is an outcome with `is_error`, anything else an McpError."""

    async def go() -> ToolOutcome:
        client, load = await _tools(server)
        async with client.session(server.name) as session:
            tools = {t.name: t for t in await load(session, server_name=server.name)}
            if tool not in tools:
                raise McpError(f"MCP server {server.name} has no tool {tool!r} (it has: {', '.join(sorted(tools))})")
            message = await tools[tool].ainvoke({"type": "tool_call", "id": "anima", "name": tool, "args": arguments})
        return ToolOutcome(_text_of(message.content, message.artifact), is_error=message.status == "error")

    try:
        return run_with_timeout(go, timeout_s, f"MCP server {server.name}: {tool}")
    except McpError:
        raise
    except Exception as exc:  # noqa: BLE001
        leaf = _leaf(exc)
        if isinstance(leaf, McpError):
            raise leaf from None
        raise _failure(server, exc) from None
