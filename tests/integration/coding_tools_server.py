"""A real MCP server standing in for an external coding agent (Stelis's "ツール作成セッション"): it writes files into
its own working directory and runs Python programs there. FastMCP from the `mcp` SDK over stdio.

Tools: write_file (a file in the working directory; no path leaves it), run_python (runs one of its files with the
given standard input under a timeout; answers JSON {returncode, stdout, stderr})."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

server = FastMCP("coding-tools", log_level="WARNING")
WORKDIR = Path.cwd()


def _inside(name: str) -> Path:
    path = (WORKDIR / name).resolve()
    if not path.is_relative_to(WORKDIR.resolve()):
        raise ValueError(f"{name!r} is outside the working directory")
    return path


@server.tool()
def write_file(name: str, text: str) -> str:
    """Write a file in the working directory."""
    path = _inside(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return f"wrote {name} ({len(text)} characters)"


@server.tool()
def run_python(name: str, stdin: str = "", timeout_s: float = 20.0) -> str:
    """Run a Python file of the working directory with this standard input."""
    done = subprocess.run(
        [sys.executable, str(_inside(name))],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=WORKDIR,
    )
    return json.dumps({"returncode": done.returncode, "stdout": done.stdout[-4000:], "stderr": done.stderr[-2000:]})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    WORKDIR = Path(parser.parse_args().workdir)
    WORKDIR.mkdir(parents=True, exist_ok=True)
    server.run()
