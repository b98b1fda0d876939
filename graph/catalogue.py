"""The persona's command catalogue, for the doors that are not the persona: `nodes/commands/` is the persona's own
door, and no door imports another, so the web app and the command line ask here (the assembly layer) which commands
exist — e.g. to check a config.yaml's `consent.auto_approve` before it is written."""

from __future__ import annotations

from collections.abc import Iterable

from nodes.commands import registry


def unknown_commands(names: Iterable[str]) -> list[str]:
    """The names (types or aliases) no command of the catalogue answers to, in the order given."""
    commands = registry()
    return [name for name in names if commands.get(name) is None]
