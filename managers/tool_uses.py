"""HMP's long-term store of frequently used tools and links: which commands count as a use, and of what — a tool
(`mcp.call` by its server.tool, `search.web`) or a link of the semantic graph (`links.*` by the link or concept it
names) — and the "most used" view (`tools.used`, the Inner-life figures)."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import ToolUse

KINDS = ("tool", "link")


def used_thing(command_type: str, args: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, name) that an executed command used, or None for a command that uses no tool or link."""
    if command_type == "mcp.call":
        server, tool = args.get("server"), args.get("tool")
        return ("tool", f"mcp.call {server}.{tool}") if server and tool else ("tool", "mcp.call")
    if command_type == "search.web":
        return "tool", "search.web"
    if command_type.startswith("links."):
        if args.get("id") is not None:
            return "link", f"link {args['id']}"
        if args.get("source") and args.get("target"):
            return "link", f"{args['source']} → {args['target']}"
        if args.get("concept"):
            return "link", f"links of {args['concept']}"
    return None


class ToolUseManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def record(self, command_type: str, args: dict[str, Any], *, now: datetime) -> ToolUse | None:
        """Count the use an executed command made (nothing for other commands)."""
        thing = used_thing(command_type, args)
        return self.repos.tool_uses.count(*thing, now=now) if thing is not None else None

    def most_used(self, *, kind: str | None = None, limit: int = 10) -> builtins.list[ToolUse]:
        if kind is not None and kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        return self.repos.tool_uses.most_used(kind=kind, limit=limit)

    def lines(self, *, kind: str | None = None, limit: int = 10) -> builtins.list[str]:
        return [
            f"{row.name} ({row.kind}): {row.uses} use(s), last {row.last_used_at:%Y-%m-%d %H:%M}"
            for row in self.most_used(kind=kind, limit=limit)
        ]
