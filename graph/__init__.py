"""Assembly: playbook model + compiler, the Agent API, checkpointing, the loop driver, the Studio factory.

The names below are imported on first use (PEP 562): `graph.reports` or `graph.services` do not load LangGraph and
the steps for a command (`run.py approvals`, `config show`) that only reads the database."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph.agent import Agent, OpenGraph, build_agent, open_graph
    from graph.compiler import build_graph
    from graph.playbook import Playbook, PlaybookError, load_playbook, parse_playbook

_WHERE = {
    "Agent": "graph.agent",
    "build_agent": "graph.agent",
    "OpenGraph": "graph.agent",
    "open_graph": "graph.agent",
    "build_graph": "graph.compiler",
    "Playbook": "graph.playbook",
    "PlaybookError": "graph.playbook",
    "load_playbook": "graph.playbook",
    "parse_playbook": "graph.playbook",
}

__all__ = [
    "Agent",
    "OpenGraph",
    "Playbook",
    "PlaybookError",
    "build_agent",
    "build_graph",
    "load_playbook",
    "open_graph",
    "parse_playbook",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
