"""The app factory: `create_app(overrides)` → FastAPI with the pages, the API under /api (OpenAPI at /openapi.json),
the persona as an MCP server at /mcp, the live streams, the vendored static files, the guard (token, CSRF) and JSON
errors. Nothing is opened at import
time: the services open when the app starts (its lifespan) and close when it stops. Around all of it, the Host check
(web/security.py `HostGuard`): the app answers only to the names it is served as."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route

from persona.settings import Overrides
from web import api, errors, security
from web.a2a import A2A_PATHS, CARD_PATH, A2AServer, outbox_running
from web.api import docs as api_docs
from web.context import DeploymentServices, PersonaPrefix, WebServices, is_deployment
from web.mcp import MCP_PATH
from web.mcp import Mount as McpMount
from web.metrics import METRICS_PATH, metrics
from web.pages import page_router
from web.templating import STATIC, language_of, make_templates


def create_app(
    overrides: Overrides | None = None,
    *,
    api_token: str | None = None,
    services: WebServices | None = None,
    allowed_hosts: security.AllowedHosts | str | Iterable[str] | None = None,
) -> FastAPI:
    """`overrides`: the settings the command line gives (data_dir, db_url, persona_dir, …). `services`: already
    opened ones (tests); the app then leaves closing them to the caller. `allowed_hosts`: the names it answers to
    besides the loopback ones (web/server.py adds the one it is bound to)."""

    mcp = McpMount()
    a2a = A2AServer()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = app.state.services is None
        if owned and is_deployment(overrides or Overrides()):  # many personas: /personas, /p/<name>/…
            app.state.services = DeploymentServices.open(overrides or Overrides(), api_token=api_token)
        elif owned:
            app.state.services = WebServices.open(overrides, api_token=api_token)
        try:
            async with mcp.running(), outbox_running(lambda: app.state.services, a2a):
                yield
        finally:
            if owned:
                app.state.services.close()
                app.state.services = None

    app = FastAPI(
        title="anima",
        version="0.1.0",
        lifespan=lifespan,
        description="Watch the persona think, talk with it, and curate its inner life.",
        docs_url=None,
        redoc_url=None,
    )  # /docs from vendored assets (web/api/docs.py), not a CDN
    app.state.services = services
    hosts = (
        allowed_hosts
        if isinstance(allowed_hosts, security.AllowedHosts)
        else security.AllowedHosts.serving(None, allowed_hosts)
    )
    app.state.allowed_hosts = hosts
    app.state.templates = make_templates()
    app.state.language_of = language_of  # the request's language, for the error handlers (web/errors.py)
    app.middleware("http")(security.guard)
    app.add_middleware(PersonaPrefix)
    app.add_middleware(security.HostGuard, allowed=hosts)  # the outermost: before the prefix, the guard, /static, /mcp
    errors.install(app)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    api.install(app)  # the JSON API under /api and its OpenAPI (web/api/)
    api_docs.install(app)  # its reference page, /docs, working offline
    app.include_router(page_router())
    app.router.routes.append(Route(METRICS_PATH, endpoint=metrics, methods=["GET"], include_in_schema=False))
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp))  # the persona as an MCP server (web/mcp.py; /p/<name>/mcp)
    # the persona as an A2A agent (web/a2a.py): its public card, and the endpoint behind the guard
    app.router.routes.append(Route(CARD_PATH, endpoint=a2a.card, methods=["GET"], include_in_schema=False))
    for path in A2A_PATHS:
        app.router.routes.append(Route(path, endpoint=a2a, methods=["POST"]))
    return app
