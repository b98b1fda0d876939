"""What a request gets through `Depends`: the web's own services over the data dir (no model is loaded here),
one unit of work per request, the current settings and persona.

Over a deployment of many personas (`run.py serve --db postgresql://…` on a database with a registry, graph/fleet/)
the app serves every persona: `/personas` lists them, and `/p/<name>/…` is any page or API of one of them
(`PersonaPrefix` moves the prefix into the request's root path, so the routes are the same as for one persona).
Each persona gets its own `WebServices` over its own schema, sharing the deployment's connection pool."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from managers import Lazy, ManagerDeps, ManagerFactory, Managers
from managers.audience import OWNER
from memory import Database
from memory.clock import utcnow
from persona import Persona, load_persona
from persona.loader import refresh_persona
from persona.settings import Overrides, Settings, load_settings

if TYPE_CHECKING:
    from memory.retrieval.index import MemoryIndex


@dataclass
class WebServices:
    db: Database
    overrides: Overrides = field(
        default_factory=Overrides
    )  # the run's own layer (command line): settings re-read with it
    clock: Callable[[], datetime] = utcnow
    api_token: str | None = None  # required on every request when the app is bound beyond this machine
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    _persona: Persona | None = None
    _memory: MemoryIndex | None = None
    wake: Callable[[], Any] | None = None  # a deployed persona: think now (a note arrived)
    store_files: Callable[[Path], Any] | None = None  # a deployed persona: its edited files go back to the registry
    name: str | None = None  # a deployed persona's name
    listener: Any = None  # a deployment's JournalListener: live streams wake on PostgreSQL's NOTIFY
    _speech: Any = None  # (settings key, SpeechEngines): the speech model loads once, not per voice message

    @classmethod
    def open(
        cls,
        overrides: Overrides | None = None,
        *,
        api_token: str | None = None,
        clock: Any = utcnow,
        memory: MemoryIndex | None = None,
    ) -> WebServices:
        overrides = overrides or Overrides()
        located = load_settings(overrides=overrides.replace(persona_dir=None))  # where the data is
        db = Database.open(located.data_dir, located.db_url)
        return cls(db=db, overrides=overrides, clock=clock, api_token=api_token, _memory=memory)

    _managers: ManagerFactory | None = field(default=None, repr=False)

    @property
    def managers(self) -> ManagerFactory:
        """The web app's managers, built once: each request's unit gets them with the settings read again, the
        retrieval index and the speech engines opened when a manager first needs them."""
        if self._managers is None:
            self._managers = ManagerFactory(self.db, self.manager_deps)
        return self._managers

    def manager_deps(self) -> ManagerDeps:
        return ManagerDeps(
            settings=self.settings(), clock=self.clock, memory=Lazy(lambda: self.memory), speech=Lazy(self.speech)
        )

    def settings(self) -> Settings:
        """Read again on each use: the persona's config.yaml and its own changes may have moved since."""
        from graph.services import open_settings

        return open_settings(self.db, self.overrides)

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
    def memory(self) -> MemoryIndex:
        """The hybrid retrieval index (search, knowledge-base uploads); opened on first use."""
        if self._memory is None:
            from graph.services import open_memory_index

            self._memory = open_memory_index(self.db, self.settings(), self.clock)
        return self._memory

    def speech(self) -> Any:
        """The speech engines (reach/speech/), kept while their settings stay the same; the model loads on first use."""
        from managers.speech import engines_for

        settings = self.settings()
        speech = settings.speech
        key = (
            settings.cache_dir,
            tuple(sorted(speech.tts_voices.items())),
            tuple(speech.languages),
            speech.beam_size,
            tuple(sorted(speech.tts_words_per_minute.items())),
        )
        if self._speech is None or self._speech[0] != key:
            self._speech = (key, engines_for(settings))
        return self._speech[1]

    def close(self) -> None:
        if self._memory is not None and hasattr(self._memory, "close"):
            self._memory.close()
        self.db.close()


class DeploymentServices:
    """The app over a deployment: the registry, the job engine, and each persona's WebServices (opened on first use)."""

    def __init__(
        self, deployment: Any, overrides: Overrides, *, api_token: str | None = None, clock: Any = utcnow
    ) -> None:
        self.deployment, self.overrides, self.clock, self.api_token = deployment, overrides, clock, api_token
        self.csrf_token = secrets.token_urlsafe(24)
        from web.services.events import JournalListener

        self.listener = JournalListener(deployment.fleet.libpq_url())
        self._personas: dict[str, WebServices] = {}
        self._digests: dict[str, str | None] = {}

    @classmethod
    def open(cls, overrides: Overrides, *, api_token: str | None = None) -> DeploymentServices:
        from graph.fleet.personas import Deployment

        return cls(Deployment.open(deployment_url(overrides)), overrides, api_token=api_token)

    def persona(self, name: str, digest: str | None = None) -> WebServices:
        """`digest`: of its files in the registry now — an edit stored by another process is taken in."""
        services = self._personas.get(name)
        if services is not None and digest and self._digests.get(name) != digest:
            services.overrides = self.deployment.overrides_for(name, self.overrides)
            services.forget_persona()
            self._digests[name] = digest
        if services is None:
            deployment = self.deployment
            database = deployment.fleet.database(name)  # NotFound (a 404) when it is not registered
            services = WebServices(
                db=database,
                overrides=deployment.overrides_for(name, self.overrides),
                clock=self.clock,
                api_token=self.api_token,
                csrf_token=self.csrf_token,
                name=name,
                listener=self.listener,
                wake=lambda: deployment.wake(name),
                store_files=lambda directory: deployment.store_files(name, directory),
            )
            self._personas[name] = services
            self._digests[name] = digest
        return services

    def close(self) -> None:
        self.listener.close()
        for services in self._personas.values():
            services.close()
        self.deployment.close()


def deployment_url(overrides: Overrides) -> str:
    """The database the app is served over (--db, else ANIMA_DB_URL: the settings' own resolution)."""
    return load_settings(overrides=overrides.replace(persona_dir=None)).db_url or ""


def is_deployment(overrides: Overrides) -> bool:
    """Whether the app serves a deployment: a PostgreSQL database that holds a registry of personas."""
    from memory.fleet import holds_registry

    url = deployment_url(overrides)
    return url.startswith("postgresql") and holds_registry(url)


def get_services(request: Request) -> WebServices:
    """The persona this request is about: the app's one, or, over a deployment, the one its path names."""
    services: WebServices | DeploymentServices = request.app.state.services  # web/app.py create_app
    if isinstance(services, DeploymentServices):
        name = request.scope.get("anima_persona")
        if not name:
            from web.errors import ServiceError

            raise ServiceError(
                "choose a persona: /personas lists them, /p/<name>/… opens one", field="persona", status=404
            )
        return _deployed(services, name)
    return services


def _deployed(services: DeploymentServices, name: str) -> WebServices:
    from managers.errors import NotFound
    from web.errors import ServiceError

    try:
        with services.deployment.fleet.registry() as registry:
            digest = registry.require(name).files_digest
        return services.persona(name, digest)
    except NotFound as exc:
        raise ServiceError(str(exc), field="persona", status=404) from None


class PersonaPrefix:
    """ASGI middleware: `/p/<name>/rest` is `/rest` of persona `name` (its root path `/p/<name>`: links in its pages
    keep the prefix)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            app = scope.get("app")
            if path == "/" and app is not None and isinstance(app.state.services, DeploymentServices):
                from starlette.responses import RedirectResponse

                await RedirectResponse("/personas", status_code=307)(scope, receive, send)  # choose a persona first
                return
            if path.startswith("/p/"):
                name, slash, _rest = path[3:].partition("/")
                if name and not slash and scope["type"] == "http":  # /p/ada: its Talk page is /p/ada/
                    from starlette.responses import RedirectResponse

                    await RedirectResponse(f"{scope.get('root_path', '')}{path}/", status_code=307)(
                        scope, receive, send
                    )
                    return
                if name:
                    prefix = f"{scope.get('root_path', '')}/p/{name}"
                    scope = {**scope, "root_path": prefix, "anima_persona": name}
        await self.app(scope, receive, send)


def get_house(services: WebServices = Depends(get_services)) -> Iterator[Managers]:
    """One transaction per request, its managers acting for the owner: committed when the route returns, rolled back
    if it raises. What it changes of memory, the memory history names the human's doing. Routes take it through
    `unit_of_work()`."""
    with services.managers.unit(OWNER) as house:
        yield house


def unit_of_work() -> Any:
    """`house: Managers = unit_of_work()`: the request's managers over its transaction, committed before the response
    goes out ("function"
    scope), so the page's next request sees what this one wrote and a failed commit is this request's error."""
    return Depends(get_house, scope="function")
