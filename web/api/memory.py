"""/api/memory: every memory tier — browse, search (the persona's own hybrid retrieval), a human's edits, archive,
restore, delete (for good), the history of every change, and knowledge-base uploads."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, File, Path, Query, Response, UploadFile

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.memory import Done, History, KBUploaded, MemoryList, MemoryRecord, SearchResults, Tiers
from web.schemas.requests import QueryBool
from web.services import memory

router = APIRouter(prefix="/memory", tags=["memory"], responses=PERSONA)

TIER_NAMES = list(memory.TIERS)
SEARCHABLE = [name for name, tier in memory.TIERS.items() if tier.item_tier is not None]
TierPath = Path(
    ..., description="A tier (GET /api/memory/tiers); another name is a 404.", json_schema_extra={"enum": TIER_NAMES}
)
RefPath = Path(..., description="The row's id (core and notepad: the block's name, or a replaced version's id).")
NO_ROW = (404, "no such tier, or no such row in it")
NOT_HERE = (405, "not done to this tier (GET /api/memory/tiers says what may be done)")


def _edit_body() -> dict[str, Any]:
    """The PATCH body's schema in the OpenAPI: one model per editable tier (the path's tier picks it)."""
    models = {tier.edit_model.__name__: tier.edit_model for tier in memory.TIERS.values() if tier.edit_model}
    schemas = [{**model.model_json_schema(), "title": name} for name, model in models.items()]
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": schemas}}}}}


@router.get("/tiers", response_model=Tiers)
def read_tiers(house: Managers = unit_of_work()) -> Tiers:
    """Every tier: its name, size, and what may be done to it (the fields an edit may change)."""
    return memory.tiers(house)


@router.get("/search", response_model=SearchResults, responses=errors(422))
def search(
    q: str = Query(..., min_length=1, max_length=2000),
    k: int = Query(10, ge=1, le=100),
    tiers: list[str] | None = Query(
        None,
        description="Only these tiers (searchable ones).",
        json_schema_extra={"items": {"type": "string", "enum": SEARCHABLE}},
    ),
    archived: Annotated[QueryBool, Query(description="Archived items too.")] = False,
    happened_after: date | None = Query(
        None, description="Only memories of what happened on or after this day (event time; else record time)."
    ),
    happened_before: date | None = Query(None, description="Only memories of what happened before this day."),
    services: WebServices = Depends(get_services),
) -> SearchResults:
    """Hybrid search (BM25 + vectors, fused, as the persona recalls) across the searchable tiers."""
    return memory.search(
        services, q, k=k, tiers=tiers, archived=archived, happened_after=happened_after, happened_before=happened_before
    )


@router.get("/history", response_model=History, responses=errors((404, "no such tier"), 422))
def read_history(
    tier: str | None = Query(None, json_schema_extra={"enum": TIER_NAMES}),
    ref: str | None = Query(None, max_length=128),
    actor: str | None = Query(None, max_length=64),
    limit: int = Query(50, ge=1, le=500),
    before_id: int | None = Query(None, ge=1, le=MAX_ID, description="Older than this change (paging back)."),
    house: Managers = unit_of_work(),
) -> History:
    """Every change to memory, newest first: who (human, persona, …), when, the row before and after."""
    return memory.history(house, tier=tier, ref=ref, actor=actor, limit=limit, before_id=before_id)


@router.post(
    "/kb",
    response_model=KBUploaded,
    status_code=201,
    responses={
        200: {"description": "The same text is in the knowledge base already: nothing added."},
        **errors(
            (400, "a malformed multipart body"),
            403,
            (413, "over 20 MB"),
            (415, "not a PDF or UTF-8 text"),
            (422, "no file, an empty one, or one not read"),
        ),
    },
)
def upload_kb(
    response: Response,
    file: UploadFile = File(..., description="A PDF, text or markdown file (≤ 20 MB)."),
    services: WebServices = Depends(get_services),
) -> KBUploaded:
    """Add a document to the knowledge base: chunked and indexed, searchable at once."""
    result = memory.upload_kb(services, file.filename or "", file.file.read(memory.MAX_UPLOAD_BYTES + 1))
    if result.skipped:
        response.status_code = 200
    return result


@router.get("/kb", response_model=MemoryList, responses=errors(422))
def list_kb(
    q: str | None = Query(None, max_length=2000),
    limit: int = Query(50, ge=1, le=500),
    archived: Annotated[QueryBool, Query(description="The archived documents instead.")] = False,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> MemoryList:
    """The knowledge base's documents, newest first: GET /api/memory/{tier} of `kb` (POST here adds one)."""
    return memory.list_tier(house, services, "kb", q=q, archived=archived, limit=limit)


@router.get("/{tier}", response_model=MemoryList, responses=errors((404, "no such tier"), 422))
def list_tier(
    tier: str = TierPath,
    q: str | None = Query(None, max_length=2000),
    limit: int = Query(50, ge=1, le=500),
    archived: Annotated[
        QueryBool, Query(description="The archived rows instead (core/notepad: replaced versions).")
    ] = False,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> MemoryList:
    """A tier's rows, newest first; `q` narrows them (hybrid search where the tier is searchable)."""
    return memory.list_tier(house, services, tier, q=q, archived=archived, limit=limit)


@router.get("/{tier}/{ref}", response_model=MemoryRecord, responses=errors(NO_ROW, 422))
def read_record(tier: str = TierPath, ref: str = RefPath, house: Managers = unit_of_work()) -> MemoryRecord:
    return memory.get_record(house, tier, ref)


@router.get("/{tier}/{ref}/history", response_model=History, responses=errors((404, "no such tier"), 422))
def read_record_history(
    tier: str = TierPath, ref: str = RefPath, limit: int = Query(50, ge=1, le=500), house: Managers = unit_of_work()
) -> History:
    """The changes of one row, newest first."""
    return memory.history(house, tier=tier, ref=ref, limit=limit)


@router.patch(
    "/{tier}/{ref}",
    response_model=Done,
    openapi_extra=_edit_body(),
    responses=errors(403, NO_ROW, NOT_HERE, (409, "a replaced version, or a name taken already"), 422),
)
def edit_record(
    tier: str = TierPath,
    ref: str = RefPath,
    body: dict[str, Any] = Body(
        ...,
        description="The fields to change; each tier's are in "
        "GET /api/memory/tiers (e.g. diary: text, tags, priority, "
        "pinned; core: content).",
    ),
    services: WebServices = Depends(get_services),
) -> Done:
    """A human's edit (the history names the human); core memory and notepad keep what it replaces as a version."""
    return memory.edit(services, tier, ref, body)


@router.post(
    "/{tier}/{ref}/archive", response_model=Done, responses=errors(403, NO_ROW, (409, "this tier is not archived"), 422)
)
def archive_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)) -> Done:
    """Set it aside: out of the persona's lists and retrieval, restorable."""
    return memory.archive(services, tier, ref)


@router.post(
    "/{tier}/{ref}/restore",
    response_model=Done,
    responses=errors(403, NO_ROW, (409, "this tier is not restored, or the row cannot be"), 422),
)
def restore_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)) -> Done:
    """Bring it back (core/notepad: put a replaced version back)."""
    return memory.restore(services, tier, ref)


@router.delete("/{tier}/{ref}", response_model=Done, responses=errors(403, NO_ROW, NOT_HERE, 422))
def delete_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)) -> Done:
    """Delete it for good (the persona's own deletes only archive); its history stays."""
    return memory.delete(services, tier, ref)
