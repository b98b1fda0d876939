"""The persona's own settings, and the record of its human's edits of its files.

Its own settings: the few it may change itself (`persona.settings.SELF_EDITABLE`), stored in the config table
(`repos.config.self_changes()`) over its config.yaml, each change checked against the whole settings model before it is
kept. The persona changes
one with `config.update` (after its human's approval); every process takes the change at its next tick
(nodes/context.py `Services.refresh`). A change of `memory_manager.mode` is an abstract trigger.

Its human's edits (the web app's persona page): every edit is told to the persona once (its process log) and kept
in a history the page shows; the shipped default persona is never edited in place — the first edit adopts a copy
in the data dir (`adopt_directory`), which the run uses from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from managers.records import Record, read_list
from memory.repositories.config import PERSONA_EDITS_KEY
from memory.upkeep.abstracts import request_abstract

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

EDITS_KEPT = 200


class PersonaEdit(Record):
    """One of the human's edits of the persona's files (the `human/persona_edits` list, newest last)."""

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
        edits = [*self._edits(), PersonaEdit(at=now.isoformat(), what=what, by=by)]
        self.repos.config.persona_edits = [edit.stored() for edit in edits[-EDITS_KEPT:]]
        self.commit_files(f"{what} (by {by})")

    # -- its files' history: a Git repository of their own (reach/git.py) ------------------------------------------

    def files_directory(self) -> Path | None:
        """The persona directory whose history is kept: the adopted copy or the one the run names; None for the
        shipped default (it is the program's, in the program's own repository) or when `tools.persona_history` is
        off."""
        from persona.loader import default_persona_dir

        settings = self._house.deps.settings
        if not settings.tools.persona_history:
            return None
        where = self.repos.config.persona_dir or settings.persona_dir
        if not where:
            return None
        folder = Path(where).expanduser().resolve()
        if not folder.is_dir() or folder == default_persona_dir().resolve():
            return None
        return folder

    def commit_files(self, message: str) -> str | None:
        """Every change of the persona's files in one commit (the repository made on first use); the commit id, or
        None when there is no history to keep or nothing changed. A repository that cannot be written is logged:
        the edit itself stands."""
        folder = self.files_directory()
        if folder is None:
            return None
        from reach.git import GitError, commit_all

        try:
            return commit_all(folder, message[:500], author="anima <persona@anima.local>")
        except (GitError, OSError) as exc:
            log.warning("the persona's file history was not committed: %s", exc)
            return None

    def history(self, n: int = 20, file: str | None = None) -> list[str]:
        """The newest commits of the persona's files, one line each (empty: no history kept yet)."""
        folder = self.files_directory()
        if folder is None or not (folder / ".git").exists():
            return []
        from reach.git import log as git_log

        return [c.line() for c in git_log(folder, n, file)]

    def _edits(self) -> list[PersonaEdit]:
        return read_list(PersonaEdit, self.repos.config.persona_edits, PERSONA_EDITS_KEY)

    def edits(self, limit: int = 20) -> list[PersonaEdit]:
        """The human's latest edits, newest first (one that cannot be read is left out, logged)."""
        return list(reversed(self._edits()))[:limit]

    def recorded_directory(self) -> str | None:
        """The persona directory this data dir runs with, as recorded (its own copy once it was edited)."""
        return self.repos.config.persona_dir

    def preload_run_choices(self) -> None:
        """What a reload reads (persona dir, the model choices, the persona's own changes), in one query."""
        self.repos.config.preload_run_choices()

    def adopt_directory(self, directory: Path) -> None:
        """Run with `directory` as the persona from now on (a copy of the shipped default, made for an edit)."""
        self.repos.config.persona_dir = str(directory)

    # -- its own settings ---------------------------------------------------------------------------------------

    def self_changes(self) -> dict[str, Any]:
        """The persona's own setting changes (config.update), by dotted key."""
        return self.repos.config.self_changes()

    def change_setting(
        self, key: str, value: Any, *, current: Settings, reload: Callable[[dict[str, Any]], Settings], thread_id: str
    ) -> SettingChange:
        """Keep the persona's change of `key` (one of SELF_EDITABLE: the caller checks it) once `reload` — the run's
        settings with these self changes — accepts it (its SettingsError otherwise, nothing kept)."""
        settings = reload({**self.self_changes(), key: value})
        old, new = setting_value(current, key), setting_value(settings, key)
        self.repos.config.set_self_change(key, new)
        if key == "memory_manager.mode" and old != new:
            request_abstract(self.repos, thread_id, "mode_change", f"{old} -> {new}")
        return SettingChange(key, old, new, settings)
