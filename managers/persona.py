"""The persona's own settings, and the record of its human's edits of its files.

Its own settings: the few it may change itself (`persona.settings.SELF_EDITABLE`), stored in the config table
(`repos.config.self_changes()`) over its config.yaml, each change checked against the whole settings model before it is kept. The persona changes
one with `config.update` (after its human's approval); every process takes the change at its next tick
(nodes/context.py `Services.refresh`). A change of `memory_manager.mode` is an abstract trigger.

Its human's edits (the web app's persona page): every edit is told to the persona once (its process log) and kept
in a history the page shows; the shipped default persona is never edited in place — the first edit adopts a copy
in the data dir (`adopt_directory`), which the run uses from then on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from memory.upkeep.abstracts import request_abstract

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

EDITS_KEPT = 200


class PersonaEdit(TypedDict):
    at: str
    what: str
    by: str


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
        self._house = house
        self.repos = house.repos

    # -- its human's edits of its files -----------------------------------------------------------------------

    def record_edit(self, what: str, *, by: str, now: datetime) -> None:
        """Tell the persona (its running thread's process log, read once) and keep the edit in the history."""
        thread = self._house.loop.running_thread()
        self.repos.processes.add("persona.edited", f"my human edited {what}", status="ok", thread_id=thread)
        edits = self.repos.config.persona_edits
        edits.append({"at": now.isoformat(), "what": what, "by": by})
        self.repos.config.persona_edits = edits[-EDITS_KEPT:]

    def edits(self, limit: int = 20) -> list[PersonaEdit]:
        """The human's latest edits, newest first."""
        return [PersonaEdit(at=e["at"], what=e["what"], by=e["by"])
                for e in reversed(self.repos.config.persona_edits)][:limit]

    def adopt_directory(self, directory: Path) -> None:
        """Run with `directory` as the persona from now on (a copy of the shipped default, made for an edit)."""
        self.repos.config.persona_dir = str(directory)

    # -- its own settings ---------------------------------------------------------------------------------------

    def self_changes(self) -> dict[str, Any]:
        """The persona's own setting changes (config.update), by dotted key."""
        return self.repos.config.self_changes()

    def change_setting(self, key: str, value: Any, *, current: Settings,
                       reload: Callable[[dict[str, Any]], Settings], thread_id: str) -> SettingChange:
        """Keep the persona's change of `key` (one of SELF_EDITABLE: the caller checks it) once `reload` — the run's
        settings with these self changes — accepts it (its SettingsError otherwise, nothing kept)."""
        settings = reload({**self.self_changes(), key: value})
        old, new = setting_value(current, key), setting_value(settings, key)
        self.repos.config.set_self_change(key, new)
        if key == "memory_manager.mode" and old != new:
            request_abstract(self.repos, thread_id, "mode_change", f"{old} -> {new}")
        return SettingChange(key, old, new, settings)
