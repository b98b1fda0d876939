"""`run.py mcp`: the persona as an MCP server over stdio (for Claude Desktop, IDEs, other agents); the web app serves
the same server at /mcp."""

from __future__ import annotations

from cli.options import ChromaUrl, DataDir, DbUrl, PersonaDir
from cli.startup import preflight


def mcp(
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    chroma_url: str | None = ChromaUrl,
) -> None:
    """Serve the persona over MCP on stdin/stdout: tools post_note, read_messages, search_memory, list_goals,
    list_tasks; resources persona://files/{name} and anima://sessions/{id}. Nothing else is written to stdout."""
    from persona.settings import Overrides
    from web.mcp import serve_stdio

    overrides = Overrides.of(persona_dir=persona, data_dir=data_dir, db_url=db, chroma_url=chroma_url)
    preflight(overrides)
    serve_stdio(overrides)
