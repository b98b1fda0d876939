"""Live fragments over Server-Sent Events: the loop's journal rendered as the pages' HTML (htmx's sse extension
swaps them in). Each page names the event kinds it wants; the rendering is the page's own fragment template."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.templating import Jinja2Templates
from markupsafe import escape
from sse_starlette import EventSourceResponse

from i18n import N_, SOURCE
from managers.audience import OWNER
from web.context import WebServices, get_services
from web.errors import ServiceError
from web.schemas.talk import ConversationItem, ThreadOut
from web.services import events, talk, thoughts
from web.templating import BADGES, gettext_for, language_of

router = APIRouter()


def _talk_fragment(
    request: Request, services: WebServices, event: dict[str, Any], lang: str = SOURCE, person: str | None = None
) -> str | None:
    note_id = (event.get("data") or {}).get("note_id")
    if not note_id:
        return None
    with services.managers.unit(OWNER) as house:
        items = [
            i
            for i in talk.conversation(
                house, "", limit=5, after_id=int(note_id) - 1, person=person, speech=talk.speech_mode(services)
            ).items
            if i.id == note_id
        ]
    if not items:
        return None
    return _render_item(request, items[0], lang)


def _templates(request: Request) -> Jinja2Templates:
    templates: Jinja2Templates = request.app.state.templates  # web/app.py create_app
    return templates


def _render_item(request: Request, item: ConversationItem, lang: str) -> str:
    return (
        _templates(request)
        .get_template("fragments/conversation_item.html")
        .render(item=item, base=request.scope.get("root_path", ""), lang=lang)
    )


TALK_POLL_S = 0.5  # the open thread is read for new turns this often (one indexed query): any door's, live


STEP_LABELS = {
    "update_process_log": N_("opens a tick"),
    "update_drives": N_("feels its drives"),
    "prepare_context": N_("gathers its memories"),
    "call_llm": N_("thinks"),
    "extract_commands": N_("reads its own commands"),
    "execute_commands": N_("acts"),
    "reply_to_human": N_("writes to you"),
}


def talk_status(event: dict[str, Any], lang: str | None = None) -> str | None:
    """One line under the conversation while a tick runs: which step the persona is in (in the page's language)."""
    _ = gettext_for(lang)
    if event["kind"] == "tick":
        return _("tick %(tick)s done") % {"tick": event.get("tick")}
    label = STEP_LABELS.get(event.get("node") or "")
    return _("tick %(tick)s · %(step)s…") % {"tick": event.get("tick"), "step": _(label)} if label else None


@router.get("/live/talk")
async def live_talk(
    request: Request, person: str | None = Query(None, max_length=210), services: WebServices = Depends(get_services)
) -> EventSourceResponse:
    """The open thread's new turns — by any door: the page, a channel, a peer — as they are stored, and which step
    the persona is in. Without `person`: the owner's own thread."""
    managers = services.managers
    cursor = events.newest_id(managers)
    lang = language_of(request)

    def thread_now() -> tuple[str, int]:
        with managers.unit(OWNER) as house:
            thread = person or talk.owner_thread(house)
            shown = talk.conversation(house, "", limit=1, person=thread).items
        return thread, shown[-1].id if shown else 0

    def turns_after(thread: str, after: int) -> list[ConversationItem]:
        with managers.unit(OWNER) as house:
            return talk.conversation(
                house, "", limit=50, after_id=after, person=thread, speech=talk.speech_mode(services)
            ).items

    async def fragments() -> AsyncIterator[dict[str, str]]:
        nonlocal cursor
        try:
            thread, last = await asyncio.to_thread(thread_now)
        except ServiceError:
            return
        while not await request.is_disconnected():
            for event in await asyncio.to_thread(events.read_after, managers, cursor, ["step", "tick"]):
                cursor = event["id"]
                line = talk_status(event, lang)
                if line:
                    yield {"event": "status", "id": str(cursor), "data": str(escape(line))}
            for item in await asyncio.to_thread(turns_after, thread, last):
                last = item.id
                yield {"event": "message", "data": _render_item(request, item, lang).replace("\n", " ")}
            await asyncio.sleep(TALK_POLL_S)

    return EventSourceResponse(fragments(), ping=15)


BADGES_POLL_S = 2.0  # what waits for the owner, read again this often for the navigation's badges


@router.get("/live/badges")
async def live_badges(
    request: Request,
    talk_thread: str | None = Query(None, alias="talk", max_length=210),
    services: WebServices = Depends(get_services),
) -> EventSourceResponse:
    """The navigation's badges (what waits for the owner: unread notes, approvals, contact requests and refused
    messages) whenever they change, as out-of-band fragments; on the Talk page (`talk`: its open thread) the
    conversations' list too."""
    managers = services.managers
    lang = language_of(request)
    templates = _templates(request)
    base = request.scope.get("root_path", "")

    def read() -> tuple[dict[str, int], list[ThreadOut]]:
        with managers.unit(OWNER) as house:
            if talk_thread is None:
                return talk.waiting_for_owner(house), []
            listed = talk.threads(house)
        return listed.waiting, listed.threads

    async def fragments() -> AsyncIterator[dict[str, str]]:
        shown: tuple[Any, ...] | None = None
        while not await request.is_disconnected():
            waiting, threads = await asyncio.to_thread(read)
            now = (
                tuple(sorted(waiting.items())),
                tuple((t.person, t.unread, t.turns) for t in threads) if talk_thread is not None else (),
            )
            if now != shown:
                shown = now
                html = "".join(
                    templates.get_template("fragments/nav_badge.html").render(
                        key=key, waiting=waiting, oob=True, lang=lang
                    )
                    for key in BADGES
                )
                if talk_thread is not None:
                    html += (
                        '<ul id="threads" hx-swap-oob="true">'
                        + templates.get_template("fragments/talk_threads.html").render(
                            threads=threads, person=talk_thread, base=base, lang=lang
                        )
                        + "</ul>"
                    )
                yield {"event": "badges", "data": html.replace("\n", " ")}
            await asyncio.sleep(BADGES_POLL_S)

    return EventSourceResponse(fragments(), ping=15)


THOUGHT_KINDS = ("step", "tick", "tick_failed", "keepalive")


def _thought_fragment(
    request: Request, services: WebServices, event: dict[str, Any], lang: str = SOURCE
) -> dict[str, Any] | None:
    """A journal event as the Thoughts page's fragment: a closed (or failed) tick's card, or the step under way."""
    templates = _templates(request)
    if event["kind"] == "step":
        html = templates.get_template("fragments/tick_progress.html").render(event=event, lang=lang)
        return {"event": "step", "id": str(event["id"]), "data": html.strip()}
    tick = (event.get("data") or {}).get("tick", event.get("tick"))
    with services.managers.unit(OWNER) as house:
        card = thoughts.latest_card(house, event.get("thread_id"), tick)
    if card is None:
        return None
    html = templates.get_template("fragments/tick_card.html").render(card=card, lang=lang)
    return {"event": "tick", "id": str(event["id"]), "data": html.replace("\n", " "), "card": card.id}


@router.get("/live/thoughts")
async def live_thoughts(request: Request, services: WebServices = Depends(get_services)) -> EventSourceResponse:
    cursor = events.newest_id(services.managers)
    lang = language_of(request)

    async def fragments() -> AsyncIterator[dict[str, Any]]:
        sent: set[int] = set()  # a Stelis child's tick is journaled under its root: one card per tick all the same
        async for event in events.follow(
            services.managers,
            cursor,
            kinds=THOUGHT_KINDS,
            is_disconnected=request.is_disconnected,
            listener=services.listener,
        ):
            if event["kind"] == "keepalive":
                continue
            fragment = _thought_fragment(request, services, event, lang)
            if fragment is None or fragment.get("card") in sent:
                continue
            if "card" in fragment:
                sent.add(fragment.pop("card"))
            yield fragment

    return EventSourceResponse(fragments(), ping=15)


APPROVAL_KINDS = ("approval", "tick", "keepalive")  # a request, or a tick that may have run an approved one


@router.get("/live/approvals")
async def live_approvals(request: Request, services: WebServices = Depends(get_services)) -> EventSourceResponse:
    """A bare `approval` event whenever something may have changed; the page fetches its list again."""
    cursor = events.newest_id(services.managers)

    async def signals() -> AsyncIterator[dict[str, str]]:
        async for event in events.follow(
            services.managers,
            cursor,
            kinds=APPROVAL_KINDS,
            is_disconnected=request.is_disconnected,
            listener=services.listener,
        ):
            if event["kind"] != "keepalive":
                yield {"event": "approval", "id": str(event["id"]), "data": event["kind"]}

    return EventSourceResponse(signals(), ping=15)


@router.get("/live/mesh")
async def live_mesh(request: Request, services: WebServices = Depends(get_services)) -> EventSourceResponse:
    """What the mesh door sees, as it sees it (a peer met, a signed container received and verified, one refused):
    the Mesh page's live list (fragments/mesh_event.html)."""
    cursor = events.newest_id(services.managers)
    lang = language_of(request)
    template = _templates(request).get_template("fragments/mesh_event.html")

    async def fragments() -> AsyncIterator[dict[str, str]]:
        async for event in events.follow(
            services.managers,
            cursor,
            kinds=["mesh", "keepalive"],
            is_disconnected=request.is_disconnected,
            listener=services.listener,
        ):
            if event["kind"] == "mesh":
                html = template.render(event=event, lang=lang, base=request.scope.get("root_path", ""))
                yield {"event": "mesh", "id": str(event["id"]), "data": html.replace("\n", " ")}

    return EventSourceResponse(fragments(), ping=15)
