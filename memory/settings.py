"""The persona's tunable settings: its own change (a `persona/<key>` config row, written by config.update)
wins over the dotted key in persona config.yaml, which wins over the code's default."""

from __future__ import annotations

from typing import Any

from memory.repositories import Repos


def section_settings(repos: Repos, persona_config: dict[str, Any], section: str, defaults: Any) -> dict[str, Any]:
    """Every field of the dataclass `defaults` read from `section.<field>` (persona_setting), converted to the
    default's type ("false"/"0" are false for booleans)."""
    from dataclasses import fields

    values = {}
    for f in fields(defaults):
        default = getattr(defaults, f.name)
        value = persona_setting(repos, persona_config, f"{section}.{f.name}", default)
        if isinstance(default, list) and isinstance(value, str):
            values[f.name] = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(default, bool):
            values[f.name] = value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")
        else:
            values[f.name] = type(default)(value)
    return values


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
