"""The world outside the process, as plain clients: MCP servers (mcp.py), web search backends (search.py), RSS/Atom
feeds (feeds.py) and sandboxed scripts (sandbox.py). Nothing here knows the persona or its database: the commands
in nodes/commands/ call these, record every call and decide what the persona may do (everything here is an
`external` effect). Every call has a timeout and every answer a size budget (`budget`)."""

from __future__ import annotations


def budget(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters cut)"
