"""The persona's tunable settings: its own change (a `persona/<key>` config row, written by config.update)
wins over the dotted key in persona config.yaml, which wins over the code's default."""

from __future__ import annotations

from typing import Any

from memory.repositories import Repos


def persona_setting(repos: Repos, persona_config: dict[str, Any], key: str, default: Any = None) -> Any:
    value = repos.config.get(f"persona/{key}")
    if value is not None:
        return value
    node: Any = persona_config
    for part in key.split("."):
        if not isinstance(node, dict) or node.get(part) is None:
            return default
        node = node[part]
    return node
