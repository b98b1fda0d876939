"""The command line imports what a command uses (cli/lazy.py): `run.py --help` and `run.py say --help` no domain
module, `say` and the database commands neither LangGraph nor the model, vector or web stacks — checked in a fresh
interpreter's `sys.modules`, not by timing. And the help the group lists without importing a command is that
command's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli import COMMANDS, Anima, app
from cli.lazy import first_paragraph, help_in_source

ROOT = Path(__file__).resolve().parents[2]

# what no command that only reads or writes the database may load
HEAVY = {
    "langgraph",
    "langchain_core",
    "chromadb",
    "llama_cpp",
    "torch",
    "sentence_transformers",
    "onnxruntime",
    "transformers",
    "fastapi",
    "starlette",
    "uvicorn",
}
# and what a help page needs none of (typer itself brings pydantic)
DOMAIN = {"sqlalchemy", "memory", "persona", "managers", "graph", "nodes", "llm", "reach", "web"}

PROBE = """
import atexit, json, runpy, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted({m.split('.')[0] for m in sys.modules}))))
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


def loaded_by(*args: str) -> tuple[set[str], str]:
    """The top-level packages `run.py ARGS` imported, and what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    _, _, modules = done.stderr.rpartition("\nMODULES ")
    assert modules, done.stderr[-2000:]
    return set(json.loads(modules)), done.stdout


@pytest.mark.parametrize("args", [["--help"], ["say", "--help"]], ids=["run.py --help", "say --help"])
def test_help_imports_no_domain_module(args):
    loaded, shown = loaded_by(*args)
    assert "Usage" in shown
    assert not loaded & (HEAVY | DOMAIN), sorted(loaded & (HEAVY | DOMAIN))


def test_say_and_the_database_commands_import_no_heavy_stack(tmp_path):
    loaded, shown = loaded_by("say", "hello from a terminal", "--data-dir", str(tmp_path))
    assert "note 1 posted" in shown
    assert {"memory", "sqlalchemy"} <= loaded  # it did open the database
    assert not loaded & (HEAVY | {"numpy"}), sorted(loaded & (HEAVY | {"numpy"}))  # nor any vector
    for args in (["approvals", "--json"], ["config", "show", "--json"]):
        loaded, shown = loaded_by(*args, "--data-dir", str(tmp_path))
        assert shown.strip().startswith("["), (args, shown[-500:])
        assert not loaded & HEAVY, (args, sorted(loaded & HEAVY))


def test_the_group_lists_every_command_with_its_own_help_line():
    listing = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300"})
    assert listing.exit_code == 0, listing.output
    group = typer.main.get_command(app)
    assert isinstance(group, Anima)
    for name, where in COMMANDS.items():
        source_help = help_in_source(where)
        assert source_help is not None, f"{name}: no help in {where}'s source"
        command = group.load(name)  # the command itself, imported
        assert first_paragraph(source_help) == first_paragraph(command.help or ""), name
        first_line = first_paragraph(source_help).splitlines()[0]
        assert f"{name} " in listing.output and first_line in listing.output, (name, first_line)


def test_a_mistyped_command_is_told_the_near_names():
    result = CliRunner().invoke(app, ["sya"])
    assert result.exit_code == 2
    assert "Did you mean 'say'?" in result.output
