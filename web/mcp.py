"""The persona as an MCP server (FastMCP from the `mcp` SDK): `run.py mcp` serves it over stdio, and the web app
mounts it at `/mcp` (streamable HTTP, behind the same token guard as the API).

Tools: `post_note` (a note from the human, as `run.py say` writes it), `read_messages` (the conversation: the
human's notes and the persona's messages), `search_memory` (the persona's hybrid retrieval), `list_goals`,
`list_tasks`. Resources: `persona://files` and `persona://files/{name}` (the persona's bootstrap files, its
seed and ethics), `anima://sessions` and `anima://sessions/{session_id}` (every run, and one as a Markdown
transcript). What a client posts is a human note: data for the persona, never an instruction to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from managers import Managers
from managers.audience import OWNER
from memory.note_kinds import Door
from persona.settings import Overrides
from web.context import WebServices, get_services
from web.errors import ServiceError
from web.schemas.talk import NoteIn
from web.services import memory as memory_service
from web.services import persona as persona_service
from web.services import sessions as sessions_service
from web.services import talk

INSTRUCTIONS = (
    "A persona that thinks continuously. post_note leaves it a note (it answers in a later thought; "
    "read_messages shows the conversation); search_memory searches what it remembers; list_goals and "
    "list_tasks show what it works on. Resources: its persona files and its sessions."
)
MAX_RESULTS = 50
MCP_PATH = "/mcp"


def build_server(get_services: Callable[[], WebServices], *, http_path: str = MCP_PATH) -> FastMCP:
    """The MCP server over the services `get_services()` returns when a request comes (the web app's: one database,
    the persona, the memory index)."""
    server = FastMCP(
        "anima",
        instructions=INSTRUCTIONS,
        streamable_http_path=http_path,
        stateless_http=True,
        log_level="WARNING",
        # the web app's guard (web/security.py) already checks token, origin and CSRF on every request
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    def unit() -> AbstractContextManager[Managers]:
        return get_services().managers.unit(OWNER)

    @server.tool()
    async def post_note(text: str, priority: int = 1, tags: list[str] | None = None) -> dict[str, Any]:
        """Leave the persona a note (from its human). It reads it on its next tick and may answer with a message."""
        note = NoteIn(text=text, priority=priority, tags=list(tags or []))

        def write() -> dict[str, Any]:
            with unit() as house:
                item = talk.post_note(house, note, get_services().clock(), door=Door.MCP)
            return {"note_id": item.id, "text": item.text, "at": item.at.isoformat()}

        return await anyio.to_thread.run_sync(write)

    @server.tool()
    async def read_messages(limit: int = 20, after_id: int | None = None) -> dict[str, Any]:
        """The conversation, oldest first: the human's notes and the persona's messages (after a note id)."""

        def read() -> dict[str, Any]:
            with unit() as house:
                talked = talk.conversation(
                    house,
                    get_services().persona().display_name,
                    limit=max(1, min(limit, MAX_RESULTS)),
                    after_id=after_id,
                )
            return {
                "persona": talked.persona,
                "waiting": talked.waiting,
                "messages": [{"id": i.id, "who": i.who, "text": i.text, "at": i.at.isoformat()} for i in talked.items],
            }

        return await anyio.to_thread.run_sync(read)

    @server.tool()
    async def search_memory(query: str, k: int = 5, tiers: list[str] | None = None) -> dict[str, Any]:
        """Search what the persona remembers (thoughts, conversation, diary, concepts, documents…)."""

        def search() -> dict[str, Any]:
            try:
                found = memory_service.search(get_services(), query, k=max(1, min(k, MAX_RESULTS)), tiers=tiers)
            except ServiceError as exc:
                raise ValueError(str(exc)) from None
            return {
                "query": query,
                "hits": [
                    {"tier": h.tier, "ref": h.ref, "title": h.title, "text": h.text, "score": round(h.score, 4)}
                    for h in found.hits
                ],
            }

        return await anyio.to_thread.run_sync(search)

    @server.tool()
    async def list_goals(status: str | None = None) -> list[dict[str, Any]]:
        """The persona's goals (active, paused, completed, failed), most important first."""

        def read() -> list[dict[str, Any]]:
            with unit() as house:
                return [
                    {
                        "id": g.id,
                        "title": g.title,
                        "description": g.description,
                        "status": g.status,
                        "horizon": g.horizon,
                        "priority": g.priority,
                    }
                    for g in house.goals.list(status=status)
                ]

        return await anyio.to_thread.run_sync(read)

    @server.tool()
    async def list_tasks(status: str | None = None, goal_id: int | None = None) -> list[dict[str, Any]]:
        """The persona's tasks (pinned first, then by priority)."""

        def read() -> list[dict[str, Any]]:
            with unit() as house:
                return [
                    {
                        "id": t.id,
                        "title": t.title,
                        "status": t.status,
                        "priority": t.priority,
                        "pinned": t.pinned,
                        "goal_id": t.goal_id,
                    }
                    for t in house.tasks.list(status=status, goal_id=goal_id)
                ]

        return await anyio.to_thread.run_sync(read)

    @server.resource("persona://files", name="persona files", mime_type="application/json")
    def persona_files() -> list[dict[str, Any]]:
        """The persona's files: name, size, whether it exists."""
        root = persona_service.directory(get_services())
        return [
            {
                "name": name,
                "chars": len((root / name).read_text(encoding="utf-8")) if (root / name).is_file() else 0,
                "uri": f"persona://files/{name}",
            }
            for name in persona_service.FILES
        ]

    @server.resource("persona://files/{name}", name="persona file", mime_type="text/plain")
    def persona_file(name: str) -> str:
        """One persona file (IDENTITY.md, SOUL.md, …, seed.txt, ethics.yaml)."""
        try:
            return persona_service.read_file(get_services(), name).text
        except ServiceError as exc:
            raise ValueError(str(exc)) from None

    @server.resource("anima://sessions", name="sessions", mime_type="application/json")
    def sessions() -> list[dict[str, Any]]:
        """Every run of the loop, newest first."""
        with unit() as house:
            return [s.model_dump(mode="json") for s in sessions_service.listing(house).items]

    @server.resource("anima://sessions/{session_id}", name="session transcript", mime_type="text/markdown")
    def session(session_id: int) -> str:
        """One session as a Markdown transcript."""
        with unit() as house:
            try:
                body, _, _ = sessions_service.export(house, int(session_id), "md")
            except ServiceError as exc:
                raise ValueError(str(exc)) from None
        return body.decode("utf-8")

    return server


def serve_stdio(overrides: Overrides | None) -> None:
    """`run.py mcp`: the persona over stdio until the client closes it."""
    services = WebServices.open(overrides)
    try:
        build_server(lambda: services).run("stdio")
    finally:
        services.close()


_REQUEST_SERVICES: ContextVar[WebServices | None] = ContextVar("anima_mcp_services", default=None)


def _request_services() -> WebServices:
    services = _REQUEST_SERVICES.get()
    if services is None:
        raise RuntimeError("an MCP request without a persona")
    return services


class Mount:
    """`/mcp` in the web app (and `/p/<name>/mcp` over a deployment): an ASGI endpoint that resolves the persona the
    request is about, as every route does (web/context.py `get_services`), and hands the request to the server of
    the app's current lifespan (a FastMCP session manager runs once, so each start of the app builds its own)."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        server = build_server(_request_services)
        app = server.streamable_http_app()
        async with server.session_manager.run():
            self.app = app
            try:
                yield
            finally:
                self.app = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        if self.app is None:
            await _refuse(503, "the MCP server is not running")(scope, receive, send)
            return
        try:
            services = get_services(Request(scope))
        except ServiceError as exc:
            await _refuse(exc.status, exc.message, exc.field)(scope, receive, send)
            return
        token = _REQUEST_SERVICES.set(services)  # the server's tasks start in this context: they see the persona
        try:
            await self.app(scope, receive, send)
        finally:
            _REQUEST_SERVICES.reset(token)


def _refuse(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field, "status": status}, status_code=status)
