"""The persona's own settings: the few it may change itself (`persona.settings.SELF_EDITABLE`), stored as
`persona/<key>` rows over its config.yaml, each change checked against the whole settings model before it is kept.

The persona changes one with `config.update` (after its human's approval); every process takes the change at its
next tick (nodes/context.py `Services.refresh`). A change of `memory_manager.mode` is an abstract trigger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory.upkeep.abstracts import request_abstract

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

SELF_CHANGE_PREFIX = "persona/"  # + a dotted setting key: the persona's own change of it (config.update)


def setting_value(settings: Settings, key: str) -> Any:
    """The value of a dotted setting (`memory_manager.mode`)."""
    value: Any = settings
    for part in key.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class SettingChange:
    key: str
    old: Any
    value: Any
    settings: Settings  # the settings with the change


class PersonaManager:
    """The persona's own settings, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    def self_changes(self) -> dict[str, Any]:
        """The persona's own setting changes (config.update), by dotted key."""
        return {key[len(SELF_CHANGE_PREFIX):]: value
                for key, value in self.repos.config.with_prefix(SELF_CHANGE_PREFIX).items()}

    def change_setting(self, key: str, value: Any, *, current: Settings,
                       reload: Callable[[dict[str, Any]], Settings], thread_id: str) -> SettingChange:
        """Keep the persona's change of `key` (one of SELF_EDITABLE: the caller checks it) once `reload` — the run's
        settings with these self changes — accepts it (its SettingsError otherwise, nothing kept)."""
        settings = reload({**self.self_changes(), key: value})
        old, new = setting_value(current, key), setting_value(settings, key)
        self.repos.config.set(f"{SELF_CHANGE_PREFIX}{key}", new)
        if key == "memory_manager.mode" and old != new:
            request_abstract(self.repos, thread_id, "mode_change", f"{old} -> {new}")
        return SettingChange(key, old, new, settings)
