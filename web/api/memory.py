"""/api/memory: every memory tier — browse, search (the persona's own hybrid retrieval), a human's edits, archive,
restore, delete (for good), the history of every change, and knowledge-base uploads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, File, Path, Query, Response, UploadFile

from memory import Repos
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.memory import Done, History, KBUploaded, MemoryList, MemoryRecord, SearchResults, Tiers
from web.services import memory

router = APIRouter(prefix="/memory", tags=["memory"])

TierPath = Path(..., description="A tier: core, notepad, llm_memory, diary, concept, link, goal, task, episode, "
                                 "entity, insight, fact, question, kb (GET /api/memory/tiers).")
RefPath = Path(..., description="The row's id (core and notepad: the block's name, or a replaced version's id).")


def _edit_body() -> dict:
    """The PATCH body's schema in the OpenAPI: one model per editable tier (the path's tier picks it)."""
    models = {tier.edit_model.__name__: tier.edit_model for tier in memory.TIERS.values() if tier.edit_model}
    schemas = [{**model.model_json_schema(), "title": name} for name, model in models.items()]
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": schemas}}}}}


@router.get("/tiers", response_model=Tiers)
def read_tiers(repos: Repos = unit_of_work()):
    """Every tier: its name, size, and what may be done to it (the fields an edit may change)."""
    return memory.tiers(repos)


@router.get("/search", response_model=SearchResults)
def search(q: str = Query(..., min_length=1, max_length=2000), k: int = Query(10, ge=1, le=100),
           tiers: list[str] | None = Query(None, description="Only these tiers (searchable ones)."),
           archived: bool = Query(False, description="Archived items too."),
           services: WebServices = Depends(get_services)):
    """Hybrid search (BM25 + vectors, fused, as the persona recalls) across the searchable tiers."""
    return memory.search(services, q, k=k, tiers=tiers, archived=archived)


@router.get("/history", response_model=History)
def read_history(tier: str | None = Query(None), ref: str | None = Query(None, max_length=128),
                 actor: str | None = Query(None, max_length=64), limit: int = Query(50, ge=1, le=500),
                 before_id: int | None = Query(None, ge=1, le=MAX_ID, description="Older than this change (paging back)."),
                 repos: Repos = unit_of_work()):
    """Every change to memory, newest first: who (human, persona, …), when, the row before and after."""
    return memory.history(repos, tier=tier, ref=ref, actor=actor, limit=limit, before_id=before_id)


@router.post("/kb", response_model=KBUploaded, status_code=201,
             responses={200: {"description": "The same text is in the knowledge base already: nothing added."},
                        413: {"description": "Over 20 MB."}, 415: {"description": "Not a PDF or UTF-8 text."}})
def upload_kb(response: Response, file: UploadFile = File(..., description="A PDF, text or markdown file (≤ 20 MB)."),
              services: WebServices = Depends(get_services)):
    """Add a document to the knowledge base: chunked and indexed, searchable at once."""
    result = memory.upload_kb(services, file.filename or "", file.file.read(memory.MAX_UPLOAD_BYTES + 1))
    if result.skipped:
        response.status_code = 200
    return result


@router.get("/{tier}", response_model=MemoryList)
def list_tier(tier: str = TierPath, q: str | None = Query(None, max_length=2000), limit: int = Query(50, ge=1, le=500),
              archived: bool = Query(False, description="The archived rows instead (core/notepad: replaced versions)."),
              repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    """A tier's rows, newest first; `q` narrows them (hybrid search where the tier is searchable)."""
    return memory.list_tier(repos, services, tier, q=q, archived=archived, limit=limit)


@router.get("/{tier}/{ref}", response_model=MemoryRecord)
def read_record(tier: str = TierPath, ref: str = RefPath, repos: Repos = unit_of_work()):
    return memory.get_record(repos, tier, ref)


@router.get("/{tier}/{ref}/history", response_model=History)
def read_record_history(tier: str = TierPath, ref: str = RefPath, limit: int = Query(50, ge=1, le=500),
                        repos: Repos = unit_of_work()):
    """The changes of one row, newest first."""
    return memory.history(repos, tier=tier, ref=ref, limit=limit)


@router.patch("/{tier}/{ref}", response_model=Done, openapi_extra=_edit_body())
def edit_record(tier: str = TierPath, ref: str = RefPath,
                body: dict[str, Any] = Body(..., description="The fields to change; each tier's are in "
                                                             "GET /api/memory/tiers (e.g. diary: text, tags, priority, "
                                                             "pinned; core: content)."),
                services: WebServices = Depends(get_services)):
    """A human's edit (the history names the human); core memory and notepad keep what it replaces as a version."""
    return memory.edit(services, tier, ref, body)


@router.post("/{tier}/{ref}/archive", response_model=Done)
def archive_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)):
    """Set it aside: out of the persona's lists and retrieval, restorable."""
    return memory.archive(services, tier, ref)


@router.post("/{tier}/{ref}/restore", response_model=Done)
def restore_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)):
    """Bring it back (core/notepad: put a replaced version back)."""
    return memory.restore(services, tier, ref)


@router.delete("/{tier}/{ref}", response_model=Done)
def delete_record(tier: str = TierPath, ref: str = RefPath, services: WebServices = Depends(get_services)):
    """Delete it for good (the persona's own deletes only archive); its history stays."""
    return memory.delete(services, tier, ref)
