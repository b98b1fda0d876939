"""The persona as an A2A agent (the `a2a-sdk`, A2A 1.0): its agent card at `/.well-known/agent-card.json` and the
A2A endpoint (JSON-RPC, streaming too) at `/a2a` and `/a2a/` — `/p/<name>/…` over a deployment — and, beside them, the
delivery of its own messages to peers (the A2A outbox, managers/peers.py).

Who calls is what its credential proves, never what the message says. A peer presents `Authorization: Bearer <the
credential the owner issued it>` (managers/peers.py: one token per credential, only its hash kept; it opens A2A and
nothing else — the owner's `ANIMA_API_TOKEN` is refused here, and a peer's token is refused everywhere else). A caller
without a credential is the one `anonymous` caller, when `a2a.anonymous` allows it (by default while the app has no API
token, i.e. listens on loopback only); its notes are by `a2a-<context>`, a name no peer may take, and whatever
`metadata.from` it claims is ignored. Each caller sees, continues and cancels only its own tasks (the SDK's task store
scoped by the caller; the database's copy too). Each caller's sends are rate-limited, and so are all callers' together;
what it may leave unanswered is capped (managers/peers.py); a request past `a2a.max_request_bytes` is refused; every
refusal is counted by caller and reason (`a2a_refusals`, the Mesh page).

What arrives is a note from that peer (source `peer`, tag `from:<name>`): data fenced in the prompt, never an
instruction (memory/provenance.py origin "peer"). The persona's next `messages.send` to that caller is the task's
reply: an answer (artifacts: its data and files, else its text; the task completes), a question (`ask`: the task
waits for the caller's answer, input-required), a refusal (`decline`: rejected), or a plain message (`plain`: a
Message instead of a task, when the caller waits for it on a fresh task). While it thinks the task is `working`; a
streaming caller (`SendStreamingMessage`) or one that asked to return at once sees that at once. After
`a2a.reply_wait_s` the task answers `working` with "still thinking", and the reply goes back later (tasks/get finds
it; a peer with an A2A address also gets it as a message of its own).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message as AsgiMessage
from starlette.types import Receive

from managers.audience import Audience, Role
from memory.clock import utcnow
from web.context import WebServices, get_services
from web.errors import ServiceError

if TYPE_CHECKING:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.types import AgentCard, Message, Part

    from managers.peers import TaskReply
    from persona.settings import A2ASettings
    from reach.hmp.limits import TokenBuckets

log = logging.getLogger(__name__)
A_PEER = Audience(Role.PEER)  # a caller, before its credential says which peer it is
A2A_PATH = "/a2a"
A2A_PATHS = (A2A_PATH, A2A_PATH + "/")  # the TCK's clients and some SDKs post to the card's URL with a slash
CARD_PATH = "/.well-known/agent-card.json"
CARD_MAX_AGE_S = 300
POLL_FIRST_S, POLL_MAX_S = 0.02, 0.5  # how often a waiting task looks for the reply: soon at first, then less often
STILL_THINKING = "still thinking — the reply will follow"
SEND_METHODS = ("SendMessage", "SendStreamingMessage", "message/send", "message/stream")
STREAMING_METHODS = ("SendStreamingMessage", "SubscribeToTask")
CALLER_SCOPE_KEY = "anima.a2a_caller"
REPLY_FOLLOWS = "anima_reply_follows"  # marks the "still thinking" status: the reply comes later (tasks/get, a message)
INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["text/plain", "application/json"]
RATE_LIMITED = -32000  # JSON-RPC's implementation-defined range; A2A 1.0 defines no rate error (-32001…-32009 are its)
INTERRUPTED_TASK_KEPT_S = 3600.0  # a task waiting for its caller's answer keeps its place in memory this long
_GUEST = re.compile(r"[^A-Za-z0-9_.-]+")


# ---- who calls -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who a request comes from, as its credential proved: a peer (`key` "peer:<id>", `peer` its name), or the one
    anonymous caller. `key` scopes tasks and counts refusals."""

    key: str
    peer: str | None = None

    def author(self, context_id: str) -> str:
        """Whose note a message becomes: the peer, or `a2a-<context>` for an anonymous caller."""
        from managers.peers import ANONYMOUS_PREFIX

        return self.peer or ANONYMOUS_PREFIX + (_GUEST.sub("", context_id)[:12] or "guest")


def anonymous_caller() -> Caller:
    from managers.peers import ANONYMOUS

    return Caller(ANONYMOUS)


def caller_of(call_context: Any) -> Caller:
    """The caller the endpoint proved (web/a2a.py `A2AServer`), from the SDK's call context."""
    user = getattr(call_context, "user", None)
    caller = getattr(user, "caller", None)
    return caller if isinstance(caller, Caller) else anonymous_caller()


def _call_context_builder() -> Any:
    from a2a.auth.user import User
    from a2a.server.context import ServerCallContext
    from a2a.server.routes.common import DefaultServerCallContextBuilder

    class CallerUser(User):
        def __init__(self, caller: Caller) -> None:
            self.caller = caller

        @property
        def is_authenticated(self) -> bool:
            return self.caller.peer is not None

        @property
        def user_name(self) -> str:
            return self.caller.key  # the SDK's task store keeps each caller's tasks apart by it

    class CallerContextBuilder(DefaultServerCallContextBuilder):
        """The proved caller as the SDK's user; the request's headers without the credential (the SDK logs its call
        context at debug level, and a secret never reaches a log)."""

        def build(self, request: Request) -> ServerCallContext:
            context = super().build(request)
            context.state["headers"] = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
            return context

        def build_user(self, request: Request) -> User:
            caller = request.scope.get(CALLER_SCOPE_KEY)
            return CallerUser(caller if isinstance(caller, Caller) else anonymous_caller())

    return CallerContextBuilder()


class Refusals:
    """What the endpoint refused, counted by caller and reason in memory and written to the database in batches (a
    flood of refusals is not a flood of writes): `flush` at most every FLUSH_EVERY_S, from a request or the outbox
    loop."""

    FLUSH_EVERY_S = 2.0
    MAX_PENDING = 1000  # distinct (caller, reason) pairs held between two flushes; more are counted under "other"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], list[Any]] = {}  # (caller, reason) -> [count, bytes, detail, at]
        self._flushed_at = time.monotonic()

    def add(self, caller: str, reason: str, *, size: int = 0, detail: str = "") -> None:
        with self._lock:
            key = (
                (caller, reason)
                if len(self._pending) < self.MAX_PENDING or (caller, reason) in self._pending
                else ("other", reason)
            )
            if key not in self._pending:  # one log line per caller and reason a batch: a flood is not a flood of lines
                log.info("A2A: refused %s from %s: %s", reason, caller, detail[:200])
            entry = self._pending.setdefault(key, [0, 0, "", None])
            entry[0] += 1
            entry[1] += size
            entry[2] = detail[:500]
            entry[3] = utcnow()

    def due(self) -> bool:
        return bool(self._pending) and time.monotonic() - self._flushed_at >= self.FLUSH_EVERY_S

    def flush(self, services: WebServices) -> None:

        with self._lock:
            pending, self._pending = self._pending, {}
            self._flushed_at = time.monotonic()
        if not pending:
            return
        try:
            with services.managers.unit(A_PEER) as house:
                peers = house.peers
                for (caller, reason), (count, size, detail, at) in pending.items():
                    peers.count_refusal(caller, reason, count=count, size=size, detail=detail, at=at)
        except Exception:  # noqa: BLE001 - counting refusals never takes the endpoint down: the batch is kept
            log.exception("A2A: the refusal counts could not be written; trying again with the next batch")
            with self._lock:
                for key, (count, size, detail, at) in pending.items():
                    entry = self._pending.setdefault(key, [0, 0, detail, at])
                    entry[0] += count
                    entry[1] += size


# ---- the card --------------------------------------------------------------------------------------------------------


def credentials_required(services: WebServices, settings: A2ASettings) -> bool:
    return settings.anonymous == "never" or (settings.anonymous == "loopback" and bool(services.api_token))


def agent_card(services: WebServices, base_url: str) -> AgentCard:
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    settings = services.settings()
    persona = services.persona()
    base = (settings.a2a.public_url or base_url).rstrip("/")
    card = AgentCard(
        name=persona.display_name,
        description=(
            f"{persona.display_name}, an anima persona: a mind that thinks continuously. A message becomes "
            "a note it reads as data; it answers when it has thought about it."
        ),
        supported_interfaces=[AgentInterface(url=base + A2A_PATH, protocol_binding="JSONRPC", protocol_version="1.0")],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=INPUT_MODES,
        default_output_modes=OUTPUT_MODES,
        skills=[
            AgentSkill(
                id="conversation",
                name="conversation",
                tags=["conversation", "persona"],
                description="Write to the persona; its reply is the task's result (it may ask back).",
                examples=["How are you today?"],
            )
        ],
    )
    card.security_schemes["bearer"].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="a credential the persona's owner issued to you (run.py peers issue NAME)"
            )
        )
    )
    if credentials_required(services, settings.a2a):
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    return card


# ---- the executor: a message → a note; the persona's reply → the task's events ------------------------------------


def _incoming_text(message: Message) -> str:
    """What the persona reads of a message: its text parts, and its data parts as JSON (files are refused by the
    card's input modes)."""
    from a2a.helpers import get_data_parts

    pieces: list[str] = []
    for part in message.parts:
        if part.HasField("text"):
            pieces.append(part.text)
        elif part.HasField("data"):
            pieces.extend(json.dumps(data, ensure_ascii=False, sort_keys=True) for data in get_data_parts([part]))
    return "\n".join(p for p in pieces if p.strip())


def reply_parts(reply: TaskReply) -> list[Part]:
    """The reply's attachments as A2A parts: data, a file (its text, or a URL)."""
    from a2a.helpers import new_data_part, new_raw_part, new_url_part

    parts: list[Part] = []
    for item in reply.parts:
        if item.get("kind") == "data":
            parts.append(new_data_part(item.get("data"), media_type="application/json"))
        elif item.get("kind") == "file" and item.get("url"):
            parts.append(
                new_url_part(
                    str(item["url"]), media_type=str(item.get("media_type") or ""), filename=str(item.get("name") or "")
                )
            )
        elif item.get("kind") == "file":
            parts.append(
                new_raw_part(
                    str(item.get("text") or "").encode("utf-8"),
                    media_type=str(item.get("media_type") or "text/plain"),
                    filename=str(item.get("name") or ""),
                )
            )
    return parts


def reply_artifacts(reply: TaskReply) -> list[tuple[str, list[Part]]]:
    """(name, parts) of each artifact of an answer: one per attachment, else the text itself."""
    from a2a.helpers import new_text_part

    attachments = reply_parts(reply)
    if attachments:
        return [
            (str(item.get("name") or item.get("kind") or "attachment"), [part])
            for item, part in zip(reply.parts, attachments)
        ]
    return [("reply", [new_text_part(reply.text)])]


def _executor(
    services: WebServices, a2a_settings: Callable[[], A2ASettings], refusals: Refusals, live: set[str]
) -> AgentExecutor:
    from a2a.helpers import new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater
    from a2a.types import TaskState

    from managers.errors import Refused
    from managers.peers import InboundLimits, Overloaded

    arrivals = threading.Lock()  # one arrival at a time: the caps are read, then written, in one go

    class PersonaExecutor(AgentExecutor):
        """A message → a note from its caller; the persona's reply → the task's result, question, refusal, or a
        message."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            message = context.message
            if message is None or context.task_id is None or context.context_id is None:
                return
            task_id, context_id = context.task_id, context.context_id
            if context.current_task is not None and context.current_task.context_id:
                context_id = context.current_task.context_id  # a follow-up naming only its task keeps its context
            caller = caller_of(context.call_context)
            updater = TaskUpdater(event_queue, task_id, context_id)
            settings = a2a_settings()
            limits = InboundLimits(
                max_chars=settings.max_message_chars,
                open_per_caller=settings.open_per_caller,
                open_total=settings.open_total,
            )
            text = _incoming_text(message)
            # until its last event is saved (the task store's `save`), the task is this request's: the store does not
            # rebuild it from the database meanwhile
            live.add(task_id)
            try:
                await self._execute(context, event_queue, task_id, context_id, caller, updater, settings, limits, text)
            except BaseException:
                live.discard(task_id)
                raise

        async def _execute(
            self,
            context: RequestContext,
            event_queue: EventQueue,
            task_id: str,
            context_id: str,
            caller: Caller,
            updater: TaskUpdater,
            settings: A2ASettings,
            limits: InboundLimits,
            text: str,
        ) -> None:
            message = context.message
            assert message is not None

            def arrive() -> str:
                with arrivals, services.managers.unit(A_PEER) as house:
                    _note, inbound = house.peers.incoming(
                        caller.author(context_id),
                        text,
                        task_id=task_id,
                        message_id=message.message_id or None,
                        context_id=context_id,
                        caller=caller.key,
                        limits=limits,
                    )
                    assert inbound is not None
                    return inbound.task_id

            started = context.current_task is not None
            # The SDK puts the caller's message into the task's history at the task's first status, unless a message
            # with its id is there already: a sender reusing ids (the persona takes such a message as a new one)
            # would be missing from it. That message is then the first status's own, which the SDK moves into the
            # history at the next status, in its place.
            echo = (
                message
                if started
                and context.current_task is not None
                and any(said.message_id == message.message_id for said in context.current_task.history)
                else None
            )

            async def start_work() -> None:
                await as_task()
                await updater.start_work(echo)

            async def as_task() -> None:
                """Task mode: the task exists (a status update may not come first) — once."""
                nonlocal started
                if not started:
                    started = True
                    task = new_task_from_user_message(message)
                    task.id, task.context_id = task_id, context_id
                    await event_queue.enqueue_event(task)

            try:
                waiting_on = await anyio.to_thread.run_sync(arrive)
            except Refused as exc:
                refusals.add(
                    caller.key,
                    "overloaded" if isinstance(exc, Overloaded) else "refused",
                    size=len(text.encode()),
                    detail=str(exc),
                )
                if echo is not None:
                    await start_work()
                await as_task()
                await updater.reject(updater.new_agent_message([new_text_part(str(exc))]))
                return
            if services.wake is not None:
                services.wake()
            configuration = context.configuration
            at_once = context.call_context.state.get("method") in STREAMING_METHODS or bool(
                configuration is not None and configuration.return_immediately
            )
            if at_once or started:  # else a plain reply may still be a Message
                await start_work()
            reply = await _wait_for_reply(services, waiting_on, settings.reply_wait_s)
            if reply is None:
                await anyio.to_thread.run_sync(lambda: _give_up(services, waiting_on))
                await as_task()
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    message=updater.new_agent_message([new_text_part(STILL_THINKING)], metadata={REPLY_FOLLOWS: True}),
                )
                return
            said = updater.new_agent_message([new_text_part(reply.text)])
            if reply.kind == "plain" and not started:
                await event_queue.enqueue_event(said)
                live.discard(task_id)  # a Message: no task is made
                return
            await as_task()
            if reply.kind == "question":
                await updater.requires_input(said)
            elif reply.kind == "decline":
                await updater.reject(said)
            else:
                for name, parts in reply_artifacts(reply):
                    await updater.add_artifact(parts, name=name)
                await updater.complete(said)

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            if context.task_id and context.context_id:
                task_id, caller = context.task_id, caller_of(context.call_context)
                await anyio.to_thread.run_sync(lambda: _cancelled(services, task_id, caller.key))
                await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    return PersonaExecutor()


async def _wait_for_reply(services: WebServices, task_id: str, wait_s: float) -> TaskReply | None:

    def read() -> TaskReply | None:
        with services.managers.unit() as house:
            return house.peers.reply_for(task_id)

    deadline = anyio.current_time() + wait_s
    pause = POLL_FIRST_S
    while True:
        reply = await anyio.to_thread.run_sync(read)
        left = deadline - anyio.current_time()
        if reply is not None or left <= 0:
            return reply
        await anyio.sleep(min(pause, left))
        pause = min(pause * 1.5, POLL_MAX_S)


def _cancelled(services: WebServices, task_id: str, caller: str) -> None:

    with services.managers.unit(A_PEER) as house:
        house.peers.cancel(task_id, caller)


def _task_store(services: WebServices, a2a_settings: Callable[[], A2ASettings], live: set[str]) -> Any:
    """The SDK's in-memory task store, each caller's tasks apart (its `user_name`: the caller's key), with the
    database behind it: a task this process does not hold (the persona restarted, or it was forgotten past
    `a2a.tasks_kept`) is rebuilt from `a2a_inbound` for its own caller only (its history: the notes its messages
    became, both ways), and a task whose reply the persona wrote after the request stopped waiting is returned with
    that reply — so a peer's tasks/get finds its answer across restarts. A task the SDK cancels is marked so in the
    database too."""
    from a2a.helpers import new_task, new_text_message
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import Artifact, Role, Task, TaskState

    terminal = {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_FAILED,
    }

    def view(task_id: str, caller: str) -> dict[str, Any] | None:
        with services.managers.unit() as house:
            return house.peers.task_view(task_id, caller)

    def turn(said: dict[str, Any], task_id: str, context_id: str) -> Message:
        message = new_text_message(
            said["text"],
            context_id=context_id,
            task_id=task_id,
            role=Role.ROLE_AGENT if said["role"] == "agent" else Role.ROLE_USER,
        )
        message.message_id = f"{task_id}-{said['note_id']}"  # the same id at every tasks/get
        return message

    def rebuilt(task_id: str, context_id: str, kept: dict[str, Any], history: list[Any]) -> Task:
        reply: TaskReply | None = kept["reply"]
        if reply is None:
            task = new_task(task_id, context_id, TaskState.TASK_STATE_WORKING, history=history)
            task.status.message.CopyFrom(new_text_message(STILL_THINKING, context_id=context_id, task_id=task_id))
            return task
        state = {"question": TaskState.TASK_STATE_INPUT_REQUIRED, "decline": TaskState.TASK_STATE_REJECTED}.get(
            reply.kind, TaskState.TASK_STATE_COMPLETED
        )
        artifacts = (
            []
            if state != TaskState.TASK_STATE_COMPLETED
            else [
                Artifact(artifact_id=f"{task_id}-{n}", name=name, parts=parts)
                for n, (name, parts) in enumerate(reply_artifacts(reply))
            ]
        )
        task = new_task(task_id, context_id, state, artifacts=artifacts, history=history)
        task.status.message.CopyFrom(new_text_message(reply.text, context_id=context_id, task_id=task_id))
        return task

    class PersonaTaskStore(InMemoryTaskStore):
        def __init__(self) -> None:
            from a2a.server.owner_resolver import resolve_user_scope

            super().__init__(owner_resolver=resolve_user_scope)
            self._finished: dict[str, dict[str, None]] = {}  # caller -> its finished tasks, oldest first
            self._finished_lock = threading.Lock()

        async def get(self, task_id: str, context: Any = None) -> Task | None:
            task = await super().get(task_id, context)
            if task_id in live or (task is not None and task.status.state != TaskState.TASK_STATE_WORKING):
                return task
            caller = caller_of(context).key
            kept = await anyio.to_thread.run_sync(lambda: view(task_id, caller))
            if kept is None or (task is not None and kept["status"] != "expired"):
                return task  # unknown to this caller, or a request of this process still waits on it
            context_id = task.context_id if task is not None else str(kept["context_id"])
            if kept["reply"] is None and task is not None:
                return task
            # the task as this process held it keeps the messages as they were sent; else the database's turns
            history = (
                list(task.history)
                if task is not None
                else [turn(said, task_id, context_id) for said in kept["history"]]
            )
            return rebuilt(task_id, context_id, kept, history)

        async def save(self, task: Task, context: Any = None) -> None:
            await super().save(task, context)
            if (
                task.status.state in terminal
                or task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                or (task.status.HasField("message") and REPLY_FOLLOWS in task.status.message.metadata)
            ):
                live.discard(task.id)  # the request's last event: from now on the database may know more
            if task.status.state == TaskState.TASK_STATE_CANCELED:
                caller = caller_of(context).key
                await anyio.to_thread.run_sync(lambda: _cancelled(services, task.id, caller))
            if task.status.state not in terminal:
                return
            owner = caller_of(context).key
            with self._finished_lock:
                finished = self._finished.setdefault(owner, {})
                finished[task.id] = None
                forgotten = []
                while len(finished) > a2a_settings().tasks_kept:
                    oldest = next(iter(finished))
                    del finished[oldest]
                    forgotten.append(oldest)
            for task_id in forgotten:  # tasks/get still finds its last turn in the database
                await self.delete(task_id, context)

    return PersonaTaskStore()


def _orphan_waiting(services: WebServices) -> int:

    with services.managers.unit(A_PEER) as house:
        return house.peers.orphan_waiting()


def _give_up(services: WebServices, task_id: str) -> None:

    with services.managers.unit(A_PEER) as house:
        house.peers.give_up_waiting(task_id)


def _base_url(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return str(request.base_url).rstrip("/") + root.rstrip("/")


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message, "field": None, "status": status}, status_code=status, headers=headers)


def _jsonrpc_error(status: int, request_id: Any, error: Any, headers: dict[str, str] | None = None) -> Response:
    from a2a.server.request_handlers.response_helpers import build_error_response

    return JSONResponse(build_error_response(request_id, error), status_code=status, headers=headers)


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The request's body, or None once it passes `limit` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> AsgiMessage:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: the client's disconnect, as the server reports it

    return replayed


def _peek(body: bytes) -> tuple[Any, str | None]:
    """The JSON-RPC request's id and method, when the body is one (the SDK answers whatever it is not)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    request_id = data.get("id")
    method = data.get("method")
    return (
        request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None,
        method if isinstance(method, str) else None,
    )


class A2AServer:
    """The card and the endpoint, resolving the persona each request is about (web/context.py `get_services`); one
    request handler (its task store), rate limits and refusal counts per persona, built on first use."""

    def __init__(self) -> None:
        self._routers: dict[int, Any] = {}
        self._settings: dict[int, tuple[float, A2ASettings]] = {}
        self._buckets: dict[int, tuple[TokenBuckets, TokenBuckets]] = {}
        self._refusals: dict[int, Refusals] = {}
        self._card_first_seen: dict[tuple[int, str], datetime] = {}
        self._lock = threading.Lock()

    SETTINGS_TTL_S = 5.0  # the A2A section is read again at most this often (reading the settings costs tens of ms)

    def a2a_settings(self, services: WebServices) -> A2ASettings:
        """The persona's `a2a` settings, read again when older than SETTINGS_TTL_S."""
        now = time.monotonic()
        cached = self._settings.get(id(services))
        if cached is None or now - cached[0] > self.SETTINGS_TTL_S:
            cached = (now, services.settings().a2a)
            self._settings[id(services)] = cached
        return cached[1]

    def refusals(self, services: WebServices) -> Refusals:
        with self._lock:
            return self._refusals.setdefault(id(services), Refusals())

    def _allowed(self, services: WebServices, settings: A2ASettings, caller: Caller) -> bool:
        """A token bucket per caller and one for all (reach/hmp/limits.py), at the settings' rates a minute."""
        from reach.hmp.limits import TokenBuckets

        with self._lock:
            kept = self._buckets.get(id(services))
            rate, all_rate = settings.rate_per_minute / 60.0, settings.rate_total_per_minute / 60.0
            if kept is None or kept[0].rate != rate or kept[1].rate != all_rate:
                kept = (
                    TokenBuckets(rate=rate, burst=max(5.0, settings.rate_per_minute / 5), max_peers=10_000),
                    TokenBuckets(rate=all_rate, burst=max(5.0, settings.rate_total_per_minute / 5)),
                )
                self._buckets[id(services)] = kept
            per_caller, total = kept
            return per_caller.allow(caller.key) and total.allow("*")

    # ---- the card ----
    async def card(self, request: Request) -> Response:
        """The agent card, with the caching headers A2A asks for: Cache-Control, an ETag of its bytes and the moment
        this process first served those bytes (Last-Modified); If-None-Match / If-Modified-Since answer 304."""
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict

        try:
            services = get_services(request)
        except ServiceError as exc:
            return JSONResponse(
                {"error": exc.message, "field": exc.field, "status": exc.status}, status_code=exc.status
            )
        if not services.settings().a2a.enabled:
            return _refuse(404, "A2A is off (a2a.enabled)")
        body = json.dumps(
            agent_card_to_dict(agent_card(services, _base_url(request))), ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        with self._lock:
            since = self._card_first_seen.setdefault((id(services), etag), utcnow().replace(microsecond=0))
        headers = {
            "Cache-Control": f"public, max-age={CARD_MAX_AGE_S}",
            "ETag": etag,
            "Last-Modified": format_datetime(since, usegmt=True),
        }
        if _not_modified(request, etag, since):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    # ---- the endpoint ----
    def _router(self, services: WebServices, base_url: str) -> Any:
        from a2a.server.request_handlers import DefaultRequestHandler
        from a2a.server.routes import create_jsonrpc_routes
        from starlette.routing import Router

        with self._lock:
            router = self._routers.get(id(services))
        if router is None:
            orphaned = _orphan_waiting(services)  # this process holds no task yet: none of those waits any more
            if orphaned:
                log.info(
                    "A2A: %d task(s) left waiting by the last run; their replies go by tasks/get and message", orphaned
                )
            settings = lambda: self.a2a_settings(services)  # noqa: E731 - read again while the app runs
            live: set[str] = set()  # the tasks a request of this process is running
            executor = _executor(services, settings, self.refusals(services), live)
            handler = DefaultRequestHandler(
                agent_executor=executor,
                task_store=_task_store(services, settings, live),
                agent_card=agent_card(services, base_url),
                validate_input_modes=True,
                interrupted_task_timeout=INTERRUPTED_TASK_KEPT_S,
            )
            builder = _call_context_builder()
            routes = [
                route
                for path in A2A_PATHS
                for route in create_jsonrpc_routes(handler, rpc_url=path, context_builder=builder)
            ]
            router = Router(routes=routes)
            with self._lock:
                router = self._routers.setdefault(id(services), router)
        return router

    def _authenticate(
        self, services: WebServices, settings: A2ASettings, request: Request
    ) -> tuple[Caller | None, str]:
        """(the caller, "") or (None, why it is refused), or (a blocked peer, why). A bearer token must be a live
        credential the owner issued to a peer; the owner's own token is not one."""
        from web.security import presented_bearer, same_secret

        token = presented_bearer(request)
        if token is None:
            if credentials_required(services, settings):
                return None, (
                    "this persona's A2A endpoint takes a credential its owner issued to you: "
                    "`Authorization: Bearer <credential>`"
                )
            return anonymous_caller(), ""
        if services.api_token and same_secret(token, services.api_token):
            return None, (
                "the owner's API token does not open A2A: a peer presents a credential the owner issued to "
                "it (run.py peers issue NAME)"
            )
        peer = _authenticated_peer(services, token)
        if peer is None:
            return None, "unknown or revoked credential"
        if peer[2]:
            return Caller(f"peer:{peer[0]}", peer[1]), f"{peer[1]} is blocked"
        return Caller(f"peer:{peer[0]}", peer[1]), ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope)
        try:
            services = get_services(request)
        except ServiceError as exc:
            await JSONResponse(
                {"error": exc.message, "field": exc.field, "status": exc.status}, status_code=exc.status
            )(scope, receive, send)
            return
        settings = self.a2a_settings(services)
        if not settings.enabled:
            await _refuse(404, "A2A is off (a2a.enabled)")(scope, receive, send)
            return
        refusals = self.refusals(services)
        response = await self._gate(services, settings, refusals, scope, receive, send)
        if refusals.due():
            await anyio.to_thread.run_sync(lambda: refusals.flush(services))
        if response is not None:
            await response(scope, receive, send)

    async def _gate(
        self, services: WebServices, settings: A2ASettings, refusals: Refusals, scope: Any, receive: Any, send: Any
    ) -> Response | None:
        """Let the request through to the SDK (None: it has answered) or the response refusing it."""
        from a2a.utils.errors import ContentTypeNotSupportedError, InvalidRequestError

        request = Request(scope)
        caller, why = await anyio.to_thread.run_sync(lambda: self._authenticate(services, settings, request))
        if caller is None:
            refusals.add("unauthenticated", "credential", detail=why)
            return _refuse(401, why, {"WWW-Authenticate": 'Bearer realm="a2a"'})
        if why:
            refusals.add(caller.key, "blocked", detail=why)
            return _refuse(403, why)
        body = await _read_body(receive, settings.max_request_bytes)
        if body is None:
            refusals.add(caller.key, "too large", size=settings.max_request_bytes, detail="request body")
            return _jsonrpc_error(
                413, None, InvalidRequestError(message=f"the request is larger than {settings.max_request_bytes} bytes")
            )
        request_id, method = _peek(body)
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            return _jsonrpc_error(
                415,
                request_id,
                ContentTypeNotSupportedError(
                    message=f"A2A's JSON-RPC binding takes application/json, not {media_type or 'no content type'!r}"
                ),
            )
        if method in SEND_METHODS and not self._allowed(services, settings, caller):
            refusals.add(caller.key, "rate", size=len(body), detail=f"{method} past a2a.rate_per_minute")
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {
                        "code": RATE_LIMITED,
                        "message": "too many messages for now: send again later (Retry-After)",
                    },
                },
                status_code=429,
                headers={"Retry-After": "10"},
            )
        await self._router(services, _base_url(request))(
            {**scope, CALLER_SCOPE_KEY: caller}, _replay(body, receive), send
        )
        return None


def _authenticated_peer(services: WebServices, token: str) -> tuple[int, str, bool] | None:
    """(id, name, blocked) of the peer the token is a live credential of."""

    with services.managers.unit(A_PEER) as house:
        peers = house.peers
        peer = peers.authenticate(token)
        return (peer.id, peer.name, peers.refuses(peer.name)) if peer is not None else None


def _not_modified(request: Request, etag: str, since: datetime) -> bool:
    match = request.headers.get("if-none-match")
    if match is not None:
        return any(tag.strip() in (etag, "*", "W/" + etag) for tag in match.split(","))
    modified = request.headers.get("if-modified-since")
    if modified:
        try:
            return since <= parsedate_to_datetime(modified)
        except (TypeError, ValueError):
            return False
    return False


# ---- the outbox: the persona's messages to peers, delivered and retried ----------------------------------------------


async def deliver_due(services: WebServices, in_flight: set[int]) -> int:
    """Send every due message of the outbox (each at most once at a time), each with the credential its peer issued
    to this persona; how many were sent now."""
    from reach.a2a import A2AError, send_text

    settings = await anyio.to_thread.run_sync(services.settings)  # the config table: never read on the event loop

    def due() -> list[tuple[int, str, str, str | None]]:
        with services.managers.unit() as house:
            peers = house.peers
            rows = [r for r in peers.due() if r.id not in in_flight]
            return [(r.id, r.url, r.text, peers.outgoing_token(r.peer_name)) for r in rows]

    def record(row_id: int, reply: str | None, error: str | None, agent: dict[str, Any] | None = None) -> None:
        with services.managers.unit(A_PEER) as house:
            peers = house.peers
            if error is None:
                peers.delivered(row_id, reply=reply, agent=agent)
            else:
                peers.undelivered(
                    row_id, error, retry_after_s=settings.a2a.retry_after_s, max_attempts=settings.a2a.max_attempts
                )

    me = (await anyio.to_thread.run_sync(services.persona)).display_name
    rows = await anyio.to_thread.run_sync(due)
    in_flight.update(row[0] for row in rows)  # the next round does not send them again while these wait

    async def one(row_id: int, url: str, text: str, token: str | None) -> bool:
        try:
            try:
                reply = await send_text(
                    url,
                    text,
                    metadata={"from": me},
                    token=token,
                    timeout_s=settings.a2a.send_timeout_s,
                    message_id=f"anima-{me}-{row_id}",
                )
            except A2AError as exc:
                error = str(exc)
                await anyio.to_thread.run_sync(lambda: record(row_id, None, error))
                return False
            await anyio.to_thread.run_sync(
                lambda: record(row_id, reply.text if reply.done else None, None, reply.agent)
            )
            return True
        finally:
            in_flight.discard(row_id)

    results = await asyncio.gather(*(one(*row) for row in rows))
    return sum(results)


@asynccontextmanager
async def outbox_running(get: Callable[[], Any], server: A2AServer | None = None) -> AsyncIterator[None]:
    """Beside the app (a single persona's, not a deployment's): deliver the outbox every `a2a.outbox_every_s`, and
    write the endpoint's refusal counts."""
    in_flight: set[int] = set()
    pending: set[asyncio.Task[int]] = set()

    async def loop() -> None:
        while True:
            services = get()
            every = 2.0
            if isinstance(services, WebServices):
                try:
                    settings = await anyio.to_thread.run_sync(services.settings)
                    every = settings.a2a.outbox_every_s
                    if settings.a2a.enabled:
                        job = asyncio.create_task(deliver_due(services, in_flight))
                        pending.add(job)
                        job.add_done_callback(pending.discard)
                    if server is not None:
                        refusals = server.refusals(services)
                        await anyio.to_thread.run_sync(lambda: refusals.flush(services))  # noqa: B023 - called within this iteration
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


__all__ = [
    "A2A_PATH",
    "A2A_PATHS",
    "CARD_PATH",
    "A2AServer",
    "Caller",
    "agent_card",
    "caller_of",
    "deliver_due",
    "outbox_running",
]
