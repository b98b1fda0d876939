"""/api/persona: the persona's files, seeds, config.yaml and skills (the human's edits, recorded); export the whole
persona as one archive, import one, or import a character card as a new persona."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from memory import Repos
from web.context import WebServices, get_services, unit_of_work
from web.schemas.persona import (
    ConfigFile,
    Created,
    FileIn,
    PersonaFile,
    PersonaOverview,
    Seed,
    SeedIn,
    SeedList,
    Skill,
    SkillIn,
)
from web.services import persona
from web.uploads import receive_upload

router = APIRouter(prefix="/persona", tags=["persona"])
REFUSED: dict[int | str, dict[str, Any]] = {409: {"description": "the shipped default persona is read-only"},
           422: {"description": "the edit is refused (the message names file:line)"}}
UPLOAD = {"requestBody": {"content": {"multipart/form-data": {"schema": {
    "type": "object", "properties": {"file": {"type": "string", "format": "binary"}}, "required": ["file"]}}}}}


@router.get("", response_model=PersonaOverview)
def read_persona(repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    """Name, directory, whether it may be edited, its files, skills, named seeds and the human's recent edits."""
    return persona.overview(services, repos)


@router.get("/files/{name}", response_model=PersonaFile, responses={404: {"description": "not a persona file"}})
def read_file(name: str = Path(max_length=64), services: WebServices = Depends(get_services)):
    return persona.read_file(services, name)


@router.put("/files/{name}", response_model=PersonaFile, responses=REFUSED)
def write_file(body: FileIn, name: str = Path(max_length=64), repos: Repos = unit_of_work(),
               services: WebServices = Depends(get_services)):
    """IDENTITY.md, SOUL.md, … (each at most 20,000 characters), seed.txt, ethics.yaml (checked first)."""
    return persona.write_file(services, repos, name, body.text, services.clock())


@router.get("/config", response_model=ConfigFile)
def read_config(services: WebServices = Depends(get_services)):
    return persona.read_config(services)


@router.put("/config", response_model=ConfigFile, responses=REFUSED)
def write_config(body: FileIn, repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    """config.yaml, checked by the settings loader first: a broken one is refused (422, file:line) and the file on
    disk stays as it was."""
    return persona.write_config(services, repos, body.text, services.clock())


@router.get("/seeds", response_model=SeedList)
def list_seeds(services: WebServices = Depends(get_services)):
    return persona.seeds(services)


@router.get("/seeds/{name}", response_model=Seed, responses={404: {"description": "no such seed"}})
def read_seed(name: str = Path(max_length=64), services: WebServices = Depends(get_services)):
    return persona.read_seed(services, name)


@router.put("/seeds/{name}", response_model=Seed, responses=REFUSED)
def save_seed(body: SeedIn, name: str = Path(max_length=64), repos: Repos = unit_of_work(),
              services: WebServices = Depends(get_services)):
    """Save a named seed (seeds/NAME.txt): the text given, or the current seed.txt."""
    return persona.save_seed(services, repos, name, body.text, services.clock())


@router.post("/seeds/{name}/apply", response_model=Seed, responses=REFUSED)
def apply_seed(name: str = Path(max_length=64), repos: Repos = unit_of_work(),
               services: WebServices = Depends(get_services)):
    """Make the named seed the persona's seed.txt."""
    return persona.apply_seed(services, repos, name, services.clock())


@router.get("/skills", response_model=list[Skill])
def list_skills(services: WebServices = Depends(get_services)):
    return persona.skills(services)


@router.put("/skills/{name}", response_model=Skill, responses=REFUSED)
def write_skill(body: SkillIn, name: str = Path(max_length=64), repos: Repos = unit_of_work(),
                services: WebServices = Depends(get_services)):
    """A skill's whole SKILL.md (a shipped skill edited becomes the persona's own), or a new skill."""
    return persona.write_skill(services, repos, name, body.text, services.clock())


@router.get("/export", response_class=FileResponse,
            responses={200: {"content": {"application/gzip": {}}, "description": "persona/, data/, manifest.json"}})
async def export_persona(background: BackgroundTasks, services: WebServices = Depends(get_services)):
    """The whole persona as one tar.gz: its directory, its database (a consistent snapshot), its vectors."""
    path, filename = await run_in_threadpool(persona.export_archive, services, services.clock())
    background.add_task(path.unlink, missing_ok=True)
    return FileResponse(path, media_type="application/gzip", filename=filename, background=background)


@router.post("/import", response_model=Created, status_code=201, openapi_extra=UPLOAD,
             responses={413: {"description": "over 200 MB"}, 415: {"description": "not tar.gz/zip"},
                        422: {"description": "an unsafe or unusable archive"}})
async def import_persona(request: Request):
    """An exported persona (tar.gz or zip, at most 200 MB) as a new persona directory and data dir."""
    upload = await receive_upload(request, limit=persona.ARCHIVE_LIMIT, types=persona.ARCHIVE_TYPES,
                                  suffixes=persona.ARCHIVE_SUFFIXES)
    return await run_in_threadpool(persona.import_archive, upload, persona.personas_root())


@router.post("/cards", response_model=Created, status_code=201, openapi_extra=UPLOAD,
             responses={413: {"description": "over 10 MB"}, 415: {"description": "not PNG/JSON"},
                        422: {"description": "not a character card"}})
async def import_card(request: Request, services: WebServices = Depends(get_services)):
    """A Tavern/SillyTavern character card (chara_card_v2/v3: JSON, or a PNG carrying it) as a new persona."""
    upload = await receive_upload(request, limit=persona.CARD_LIMIT, types=persona.CARD_TYPES,
                                  suffixes=(".png", ".json"))
    return await run_in_threadpool(persona.import_card, services, upload, persona.personas_root())
