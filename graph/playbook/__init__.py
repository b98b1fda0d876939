"""The playbook language: model.py (what a playbook is), loader.py (YAML with file:line errors), checks.py
(the graph checks: targets, reachability, Stelis regions, subplaybooks, outputs)."""

from graph.playbook.loader import (
    load_playbook,
    parse_playbook,
    playbook_json_schema,
    resolve_playbook_path,
    shipped_playbooks_dir,
)
from graph.playbook.model import (
    END,
    CommandNode,
    ConditionalNext,
    InputError,
    LLMNode,
    Playbook,
    PlaybookError,
    SetNode,
    StelisEndNode,
    StelisStartNode,
    StepNode,
    SubplaybookNode,
    coerce_inputs,
)

__all__ = [
    "END",
    "CommandNode",
    "ConditionalNext",
    "InputError",
    "LLMNode",
    "Playbook",
    "PlaybookError",
    "SetNode",
    "StelisEndNode",
    "StelisStartNode",
    "StepNode",
    "SubplaybookNode",
    "coerce_inputs",
    "load_playbook",
    "parse_playbook",
    "playbook_json_schema",
    "resolve_playbook_path",
    "shipped_playbooks_dir",
]
