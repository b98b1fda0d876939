"""Assembly: playbook model + compiler, the Agent API, checkpointing, the loop driver, the Studio factory."""

from graph.agent import Agent, build_agent
from graph.compiler import build_graph
from graph.playbook import Playbook, PlaybookError, load_playbook, parse_playbook

__all__ = ["Agent", "Playbook", "PlaybookError", "build_agent", "build_graph", "load_playbook", "parse_playbook"]
