"""Memory: a tab per tier, a search box over the persona's own retrieval, a table per tier with Edit (an inline form),
Archive/Restore, Delete (asks first) and History, the latest changes, and knowledge-base uploads. Fragments over
htmx; the same services as /api/memory."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Query, Request, UploadFile
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from i18n import N_
from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.schemas.memory import MemoryRecord
from web.services import memory
from web.templating import render

router = APIRouter(prefix="/memory")


@router.get("")
def memory_page(
    request: Request,
    tier: str = Query("core"),
    q: str | None = Query(None, max_length=2000),
    archived: bool = Query(False),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    view = memory.page(house, services, tier, q=q, archived=archived)
    return render(request, "pages/memory.html", "memory", view=view)


@router.get("/tier/{tier}")
def tier_panel(
    request: Request,
    tier: str,
    q: str | None = Query(None, max_length=2000),
    archived: bool = Query(False),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    view = memory.page(house, services, tier, q=q, archived=archived)
    return render(request, "fragments/memory_tier.html", view=view)


@router.get("/search")
def search(
    request: Request,
    q: str = Query("", max_length=2000),
    happened_after: str = Query("", max_length=10),
    happened_before: str = Query("", max_length=10),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    """The search box's results; the two dates (empty when not given) bound the memories' event time."""
    return render(
        request,
        "fragments/memory_search.html",
        results=memory.search(
            services,
            q,
            k=20,
            happened_after=memory.day_of(happened_after, "happened_after"),
            happened_before=memory.day_of(happened_before, "happened_before"),
        ),
    )


@router.get("/history")
def history(
    request: Request,
    tier: str | None = Query(None),
    ref: str | None = Query(None, max_length=128),
    house: Managers = unit_of_work(),
) -> HTMLResponse:
    return render(request, "fragments/memory_history.html", history=memory.history(house, tier=tier, ref=ref, limit=50))


@router.post("/kb")
def upload_kb(
    request: Request, file: UploadFile = File(...), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    result = memory.upload_kb(services, file.filename or "", file.file.read(memory.MAX_UPLOAD_BYTES + 1))
    return render(request, "fragments/memory_kb_status.html", result=result)


def _row(request: Request, tier: str, record: MemoryRecord | None, flash: str | None = None) -> HTMLResponse:
    return render(request, "fragments/memory_row.html", tier=memory.tier_of(tier), record=record, flash=flash)


@router.get("/{tier}/{ref}/row")
def row(request: Request, tier: str, ref: str, house: Managers = unit_of_work()) -> HTMLResponse:
    return _row(request, tier, memory.get_record(house, tier, ref))


@router.get("/{tier}/{ref}/edit")
def edit_form(request: Request, tier: str, ref: str, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(
        request, "fragments/memory_edit.html", tier=memory.tier_of(tier), record=memory.get_record(house, tier, ref)
    )


@router.post("/{tier}/{ref}/edit")
async def save_edit(
    request: Request, tier: str, ref: str, services: WebServices = Depends(get_services)
) -> HTMLResponse:
    form = await request.form()
    body = memory.form_fields(tier, {key: str(value) for key, value in form.items()})
    done = await run_in_threadpool(memory.edit, services, tier, ref, body)
    return _row(request, tier, done.record, flash=N_("saved") if done.changed else N_("nothing changed"))


@router.post("/{tier}/{ref}/archive")
def archive(request: Request, tier: str, ref: str, services: WebServices = Depends(get_services)) -> HTMLResponse:
    done = memory.archive(services, tier, ref)
    return _row(request, tier, done.record, flash=N_("archived") if done.changed else N_("already archived"))


@router.post("/{tier}/{ref}/restore")
def restore(request: Request, tier: str, ref: str, services: WebServices = Depends(get_services)) -> HTMLResponse:
    done = memory.restore(services, tier, ref)
    return _row(request, tier, done.record, flash=N_("restored") if done.changed else N_("nothing to restore"))


@router.delete("/{tier}/{ref}")
def delete(tier: str, ref: str, services: WebServices = Depends(get_services)) -> HTMLResponse:
    memory.delete(services, tier, ref)
    return HTMLResponse("")  # the row goes
