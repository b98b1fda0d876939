"""The persona as an A2A agent (the `a2a-sdk`): its agent card at `/.well-known/agent-card.json` and the A2A
endpoint (JSON-RPC) at `/a2a` — `/p/<name>/…` over a deployment — and, beside them, the delivery of its own messages
to peers (the A2A outbox, managers/peers.py).

What arrives is a note from that peer (source `peer`, tag `from:<name>`): data fenced in the prompt, never an
instruction (nodes/provenance.py origin "peer"). The caller names itself in the message's metadata (`from`: a peer's
name; an unnamed caller is `a2a-<context>`). The A2A task stays `working` while the persona thinks; its next
`messages.send` to that peer completes the task with the reply (status message and a `reply` artifact). When the
reply takes longer than `a2a.reply_wait_s`, the task answers `working` with "still thinking" and the reply goes back
later as a message of its own (to a peer with an A2A address).

Authentication: the card is public (what the agent is and where it listens, as A2A discovery needs); the endpoint is
behind the web app's guard like the API — on loopback anyone on this machine may call it; bound beyond 127.0.0.1 a
caller sends `Authorization: Bearer <ANIMA_API_TOKEN>` (the card then declares that bearer scheme). A peer persona
sends its `a2a.peer_token` (ANIMA_A2A__PEER_TOKEN). A browser's cross-site POST is refused (no CSRF header).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from web.context import WebServices, get_services
from web.errors import ServiceError

if TYPE_CHECKING:
    from persona.settings import A2ASettings
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.types import AgentCard

log = logging.getLogger(__name__)
A2A_PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
POLL_FIRST_S, POLL_MAX_S = 0.02, 0.5  # how often a waiting task looks for the reply: soon at first, then less often
STILL_THINKING = "still thinking — the reply will follow as a message of its own"
_GUEST = re.compile(r"[^A-Za-z0-9_.-]+")


def caller_name(metadata: dict[str, Any], context_id: str) -> str:
    """Who wrote: the `from` the caller gives (a peer's name), else `a2a-<context>`."""
    from managers.errors import Refused
    from managers.peers import valid_name

    claimed = str(metadata.get("from") or "").strip()
    if claimed:
        try:
            return valid_name(claimed)
        except Refused:
            pass
    return "a2a-" + (_GUEST.sub("", context_id)[:12] or "guest")


def agent_card(services: WebServices, base_url: str) -> AgentCard:
    from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HTTPAuthSecurityScheme,
                           SecurityRequirement, SecurityScheme, StringList)

    settings = services.settings()
    persona = services.persona()
    base = (settings.a2a.public_url or base_url).rstrip("/")
    card = AgentCard(
        name=persona.display_name,
        description=(f"{persona.display_name}, an anima persona: a mind that thinks continuously. A message becomes "
                     "a note it reads as data; it answers when it has thought about it."),
        supported_interfaces=[AgentInterface(url=base + A2A_PATH, protocol_binding="JSONRPC", protocol_version="1.0")],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="conversation", name="conversation", tags=["conversation", "persona"],
                           description="Write to the persona; its reply is the task's result.",
                           examples=["How are you today?"])],
    )
    if services.api_token:
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer", description="the persona's token")))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    return card


SETTINGS_TTL_S = 5.0  # the A2A section is read again at most this often (reading the settings costs tens of ms)


def _executor(services: WebServices, a2a_settings: Callable[[], A2ASettings]) -> AgentExecutor:
    from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater
    from a2a.types import TaskState

    from managers import ManagerDeps, Managers
    from managers.errors import Refused

    class PersonaExecutor(AgentExecutor):
        """A message → a note from the peer; the persona's reply → the task's result."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            message = context.message
            if message is None:
                return
            task = context.current_task or new_task_from_user_message(message)
            if context.current_task is None:
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            metadata = dict(message.metadata.items()) if message.HasField("metadata") else {}
            author = caller_name(metadata, task.context_id)
            text = context.get_user_input()

            def arrive() -> str:
                with services.db.unit(actor="peer") as repos:
                    _note, inbound = Managers(repos, ManagerDeps(clock=services.clock)).peers.incoming(
                        author, text, task_id=task.id, message_id=message.message_id or None,
                        context_id=task.context_id or None)
                    assert inbound is not None
                    return inbound.task_id

            try:
                waiting_on = await anyio.to_thread.run_sync(arrive)
            except Refused as exc:
                await updater.reject(updater.new_agent_message([new_text_part(str(exc))]))
                return
            if services.wake is not None:
                services.wake()
            await updater.start_work(updater.new_agent_message([new_text_part("thinking")]))
            wait_s = a2a_settings().reply_wait_s
            reply = await _wait_for_reply(services, waiting_on, wait_s)
            if reply is None:
                await anyio.to_thread.run_sync(lambda: _give_up(services, waiting_on))
                await updater.update_status(TaskState.TASK_STATE_WORKING,
                                            message=new_text_message(STILL_THINKING, context_id=task.context_id,
                                                                     task_id=task.id))
                return
            await updater.add_artifact([new_text_part(reply)], name="reply")
            await updater.complete(updater.new_agent_message([new_text_part(reply)]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            if context.task_id and context.context_id:
                await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    return PersonaExecutor()


async def _wait_for_reply(services: WebServices, task_id: str, wait_s: float) -> str | None:
    from managers import Managers

    def read() -> str | None:
        with services.db.unit() as repos:
            return Managers(repos).peers.reply_for(task_id)

    deadline = anyio.current_time() + wait_s
    pause = POLL_FIRST_S
    while True:
        reply = await anyio.to_thread.run_sync(read)
        left = deadline - anyio.current_time()
        if reply is not None or left <= 0:
            return reply
        await anyio.sleep(min(pause, left))
        pause = min(pause * 1.5, POLL_MAX_S)


def _task_store(services: WebServices) -> Any:
    """The SDK's in-memory task store, with the database behind it: a task this process does not hold (the persona
    restarted) is rebuilt from `a2a_inbound`, and a task whose reply the persona wrote after the request stopped
    waiting is returned completed with that reply — so a peer's tasks/get finds its answer across restarts."""
    from a2a.helpers import new_task, new_text_artifact, new_text_message
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import Task, TaskState

    from managers import Managers

    def view(task_id: str) -> dict[str, Any] | None:
        with services.db.unit() as repos:
            return Managers(repos).peers.task_view(task_id)

    class PersonaTaskStore(InMemoryTaskStore):
        async def get(self, task_id: str, context: Any = None) -> Task | None:
            task = await super().get(task_id, context)
            if task is not None and task.status.state != TaskState.TASK_STATE_WORKING:
                return task
            kept = await anyio.to_thread.run_sync(lambda: view(task_id))
            if kept is None or (task is not None and kept["status"] != "expired"):
                return task  # unknown here, or a request of this process still waits on it
            context_id = task.context_id if task is not None else str(kept["context_id"])
            if kept["reply"] is None:
                if task is not None:
                    return task
                rebuilt = new_task(task_id, context_id, TaskState.TASK_STATE_WORKING)
                rebuilt.status.message.CopyFrom(new_text_message(STILL_THINKING, context_id=context_id,
                                                                 task_id=task_id))
                return rebuilt
            answered = new_task(task_id, context_id, TaskState.TASK_STATE_COMPLETED,
                                artifacts=[new_text_artifact("reply", str(kept["reply"]))])
            answered.status.message.CopyFrom(new_text_message(str(kept["reply"]), context_id=context_id,
                                                              task_id=task_id))
            if task is not None:
                answered.history.extend(task.history)
            return answered

    return PersonaTaskStore()


def _orphan_waiting(services: WebServices) -> int:
    from managers import Managers

    with services.db.unit(actor="peer") as repos:
        return Managers(repos).peers.orphan_waiting()


def _give_up(services: WebServices, task_id: str) -> None:
    from managers import Managers

    with services.db.unit(actor="peer") as repos:
        Managers(repos).peers.give_up_waiting(task_id)


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/") + request.scope.get("root_path", "").rstrip("/")


class A2AServer:
    """The card and the endpoint, resolving the persona each request is about (web/context.py `get_services`); one
    request handler (its task store) per persona, built on first use."""

    def __init__(self) -> None:
        self._routers: dict[int, Any] = {}
        self._settings: dict[int, tuple[float, A2ASettings]] = {}

    def a2a_settings(self, services: WebServices) -> A2ASettings:
        """The persona's `a2a` settings, read again when older than SETTINGS_TTL_S."""
        now = time.monotonic()
        cached = self._settings.get(id(services))
        if cached is None or now - cached[0] > SETTINGS_TTL_S:
            cached = (now, services.settings().a2a)
            self._settings[id(services)] = cached
        return cached[1]

    async def card(self, request: Request) -> Response:
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict

        try:
            services = get_services(request)
        except ServiceError as exc:
            return JSONResponse({"error": exc.message, "field": exc.field, "status": exc.status}, status_code=exc.status)
        if not services.settings().a2a.enabled:
            return JSONResponse({"error": "A2A is off (a2a.enabled)", "field": None, "status": 404}, status_code=404)
        return JSONResponse(agent_card_to_dict(agent_card(services, _base_url(request))))

    def _router(self, services: WebServices, base_url: str) -> Any:
        from a2a.server.request_handlers import DefaultRequestHandler
        from a2a.server.routes import create_jsonrpc_routes
        from starlette.routing import Router

        router = self._routers.get(id(services))
        if router is None:
            orphaned = _orphan_waiting(services)  # this process holds no task yet: none of those waits any more
            if orphaned:
                log.info("A2A: %d task(s) left waiting by the last run; their replies go by tasks/get and message",
                         orphaned)
            executor = _executor(services, lambda: self.a2a_settings(services))
            handler = DefaultRequestHandler(agent_executor=executor, task_store=_task_store(services),
                                            agent_card=agent_card(services, base_url))
            router = Router(routes=create_jsonrpc_routes(handler, rpc_url=A2A_PATH))
            self._routers[id(services)] = router
        return router

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope)
        try:
            services = get_services(request)
        except ServiceError as exc:
            await JSONResponse({"error": exc.message, "field": exc.field, "status": exc.status},
                               status_code=exc.status)(scope, receive, send)
            return
        if not self.a2a_settings(services).enabled:
            await JSONResponse({"error": "A2A is off (a2a.enabled)", "field": None, "status": 404},
                               status_code=404)(scope, receive, send)
            return
        await self._router(services, _base_url(request))(scope, receive, send)


# ---- the outbox: the persona's messages to peers, delivered and retried ----------------------------------------------

async def deliver_due(services: WebServices, in_flight: set[int]) -> int:
    """Send every due message of the outbox (each at most once at a time); how many were sent now."""
    from managers import ManagerDeps, Managers
    from reach.a2a import A2AError, send_text

    settings = services.settings()

    def due() -> list[tuple[int, str, str, int | None]]:
        with services.db.unit() as repos:
            rows = Managers(repos, ManagerDeps(clock=services.clock)).peers.due()
            return [(r.id, r.url, r.text, r.note_id) for r in rows if r.id not in in_flight]

    def record(row_id: int, reply: str | None, error: str | None) -> None:
        with services.db.unit(actor="peer") as repos:
            peers = Managers(repos, ManagerDeps(clock=services.clock)).peers
            if error is None:
                peers.delivered(row_id, reply=reply)
            else:
                peers.undelivered(row_id, error, retry_after_s=settings.a2a.retry_after_s,
                                  max_attempts=settings.a2a.max_attempts)

    me = services.persona().display_name
    token = settings.a2a.peer_token.get_secret_value() if settings.a2a.peer_token else None
    rows = await anyio.to_thread.run_sync(due)
    in_flight.update(row[0] for row in rows)  # the next round does not send them again while these wait

    async def one(row_id: int, url: str, text: str, note_id: int | None) -> bool:
        try:
            try:
                reply = await send_text(url, text, metadata={"from": me}, token=token,
                                        timeout_s=settings.a2a.send_timeout_s, message_id=f"anima-{me}-{row_id}")
            except A2AError as exc:
                error = str(exc)
                await anyio.to_thread.run_sync(lambda: record(row_id, None, error))
                return False
            await anyio.to_thread.run_sync(lambda: record(row_id, reply.text if reply.done else None, None))
            return True
        finally:
            in_flight.discard(row_id)

    results = await asyncio.gather(*(one(*row) for row in rows))
    return sum(results)


@asynccontextmanager
async def outbox_running(get: Callable[[], Any]) -> AsyncIterator[None]:
    """Beside the app (a single persona's, not a deployment's): deliver the outbox every `a2a.outbox_every_s`."""
    in_flight: set[int] = set()
    pending: set[asyncio.Task[int]] = set()

    async def loop() -> None:
        while True:
            services = get()
            every = 2.0
            if isinstance(services, WebServices):
                try:
                    settings = services.settings()
                    every = settings.a2a.outbox_every_s
                    if settings.a2a.enabled:
                        job = asyncio.create_task(deliver_due(services, in_flight))
                        pending.add(job)
                        job.add_done_callback(pending.discard)
                except Exception:  # noqa: BLE001 - a bad moment of the database is tried again, never the app's end
                    log.exception("A2A outbox: delivery failed; trying again")
            await asyncio.sleep(every)

    runner = asyncio.create_task(loop())
    try:
        yield
    finally:
        runner.cancel()
        for job in list(pending):
            job.cancel()
        await asyncio.gather(runner, *pending, return_exceptions=True)


__all__ = ["A2A_PATH", "CARD_PATH", "A2AServer", "agent_card", "caller_name", "deliver_due", "outbox_running"]
