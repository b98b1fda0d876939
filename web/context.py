"""What a request gets through `Depends`: the web's own services over the data dir (no model is loaded here),
one unit of work per request, the current settings and persona."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from fastapi import Depends, Request

from memory import Database, Repos
from nodes.context import utcnow
from persona import Persona, load_persona
from persona.loader import refresh_persona
from persona.settings import Settings, load_settings


@dataclass
class WebServices:
    db: Database
    flags: dict[str, Any]
    clock: Callable[[], datetime] = utcnow
    api_token: str | None = None  # required on every request when the app is bound beyond this machine
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    _persona: Persona | None = None
    _memory: Any = None

    @classmethod
    def open(cls, flags: dict[str, Any], *, api_token: str | None = None, clock=utcnow,
             memory: Any = None) -> "WebServices":
        located = load_settings(**{k: v for k, v in flags.items() if k != "persona_dir"})
        db = Database.open(located.data_dir, located.db_url)
        return cls(db=db, flags=dict(flags), clock=clock, api_token=api_token, _memory=memory)

    def settings(self) -> Settings:
        """Read again on each use: the persona's config.yaml and its own changes may have moved since."""
        from graph.services import open_settings

        return open_settings(self.db, self.flags)

    def persona(self) -> Persona:
        settings = self.settings()
        directory = Path(settings.persona_dir) if settings.persona_dir else None
        if self._persona is None or (directory and self._persona.directory != directory.resolve()):
            self._persona = load_persona(directory)
        else:
            self._persona = refresh_persona(self._persona)
        return self._persona

    def forget_persona(self) -> None:
        """The data dir's persona moved (adopted into the data dir): load it afresh on next use."""
        self._persona = None

    @property
    def memory(self):
        """The hybrid retrieval index (search, knowledge-base uploads); opened on first use."""
        if self._memory is None:
            from graph.services import open_memory_index

            self._memory = open_memory_index(self.db, self.settings(), self.clock)
        return self._memory

    def close(self) -> None:
        if self._memory is not None and hasattr(self._memory, "close"):
            self._memory.close()
        self.db.close()


def get_services(request: Request) -> WebServices:
    return request.app.state.services


def get_repos(services: WebServices = Depends(get_services)) -> Iterator[Repos]:
    """One transaction per request: committed when the route returns, rolled back if it raises. What it changes of
    memory, the memory history names the human's doing. Routes take it through `unit_of_work()`."""
    with services.db.unit(actor="human") as repos:
        yield repos


def unit_of_work() -> Any:
    """`repos: Repos = unit_of_work()`: the request's transaction, committed before the response goes out ("function"
    scope), so the page's next request sees what this one wrote and a failed commit is this request's error."""
    return Depends(get_repos, scope="function")
