"""A real MCP server for the tests (FastMCP from the `mcp` SDK): stdio by default, `--http PORT` for streamable HTTP.

Tools: add, echo, long_text (past any output budget), fail (the tool reports an error), sleep (outlasts a timeout),
web_search (the search backend's shape: a query in, results out), and env_probe (which variables it inherited)."""

from __future__ import annotations

import argparse
import json
import os
import time

from mcp.server.fastmcp import FastMCP

server = FastMCP("test-tools", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def long_text(size: int = 20000) -> str:
    """A very long answer."""
    return "wave " * (size // 5)


@server.tool()
def fail(reason: str = "no reason") -> str:
    """Always fails."""
    raise ValueError(f"the tool failed: {reason}")


@server.tool()
def sleep(seconds: float = 30) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "woke"


@server.tool()
def web_search(query: str, limit: int = 3) -> str:
    """Search results for a query, as JSON."""
    return json.dumps(
        {
            "results": [
                {
                    "title": f"Result {i} about {query}",
                    "url": f"http://example.test/{i}",
                    "content": f"Snippet {i}: {query} explained.",
                }
                for i in range(1, limit + 1)
            ]
        }
    )


@server.tool()
def env_probe() -> str:
    """The names of the environment variables the server got."""
    return ",".join(sorted(os.environ))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    options = parser.parse_args()
    if options.http:
        server.settings.port = options.http
        server.settings.log_level = "WARNING"
        server.run("streamable-http")
    else:
        server.run("stdio")
