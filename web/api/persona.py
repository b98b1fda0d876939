"""/api/persona: the persona's files, seeds, config.yaml and skills (the human's edits, recorded); export the whole
persona as one archive, import one, or import a character card as a new persona."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from managers import Managers
from web.api.responses import UPLOAD_ERRORS, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas.persona import (
    ConfigFile,
    Created,
    FileIn,
    PersonaFile,
    PersonaFileIn,
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
READ_ONLY = (409, "the shipped default persona is read-only")
REFUSED = (422, "the edit is refused (the message names file:line)")
UNREADABLE = (422, "a persona file is not UTF-8 text")
FileName = Path(
    description="One of the persona's files; another name is a 404.", json_schema_extra={"enum": list(persona.FILES)}
)
SeedName = Path(pattern=f"^{persona.SEED_NAME}$", description="Letters, digits, - and _ (at most 64).")
UPLOAD = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                    "additionalProperties": False,
                }
            }
        }
    }
}  # the form's one file (a second is a 400)


@router.get("", response_model=PersonaOverview, responses=errors(404, UNREADABLE))
def read_persona(house: Managers = unit_of_work(), services: WebServices = Depends(get_services)) -> PersonaOverview:
    """Name, directory, whether it may be edited, its files, skills, named seeds and the human's recent edits."""
    return persona.overview(services, house)


@router.get("/files/{name}", response_model=PersonaFile, responses=errors((404, "not a persona file"), 422))
def read_file(name: str = FileName, services: WebServices = Depends(get_services)) -> PersonaFile:
    return persona.read_file(services, name)


@router.put(
    "/files/{name}", response_model=PersonaFile, responses=errors(403, (404, "not a persona file"), READ_ONLY, REFUSED)
)
def write_file(
    body: PersonaFileIn,
    name: str = FileName,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> PersonaFile:
    """IDENTITY.md, SOUL.md, … (each at most 20,000 characters), seed.txt, ethics.yaml (checked first)."""
    return persona.write_file(services, house, name, body.text, services.clock())


@router.get("/config", response_model=ConfigFile, responses=errors(404, UNREADABLE))
def read_config(services: WebServices = Depends(get_services)) -> ConfigFile:
    return persona.read_config(services)


@router.put("/config", response_model=ConfigFile, responses=errors(403, 404, READ_ONLY, REFUSED))
def write_config(
    body: FileIn, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> ConfigFile:
    """config.yaml, checked by the settings loader first: a broken one is refused (422, file:line) and the file on
    disk stays as it was."""
    return persona.write_config(services, house, body.text, services.clock())


@router.get("/seeds", response_model=SeedList, responses=errors(404, UNREADABLE))
def list_seeds(services: WebServices = Depends(get_services)) -> SeedList:
    return persona.seeds(services)


@router.get("/seeds/{name}", response_model=Seed, responses=errors((404, "no such seed"), 422))
def read_seed(name: str = SeedName, services: WebServices = Depends(get_services)) -> Seed:
    return persona.read_seed(services, name)


@router.put("/seeds/{name}", response_model=Seed, responses=errors(403, 404, READ_ONLY, REFUSED))
def save_seed(
    body: SeedIn, name: str = SeedName, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> Seed:
    """Save a named seed (seeds/NAME.txt): the text given, or the current seed.txt."""
    return persona.save_seed(services, house, name, body.text, services.clock())


@router.post(
    "/seeds/{name}/apply", response_model=Seed, responses=errors(403, (404, "no such seed"), READ_ONLY, REFUSED)
)
def apply_seed(
    name: str = SeedName, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> Seed:
    """Make the named seed the persona's seed.txt."""
    return persona.apply_seed(services, house, name, services.clock())


@router.get("/skills", response_model=list[Skill], responses=errors(404, UNREADABLE))
def list_skills(services: WebServices = Depends(get_services)) -> list[Skill]:
    return persona.skills(services)


@router.put("/skills/{name}", response_model=Skill, responses=errors(403, 404, READ_ONLY, REFUSED))
def write_skill(
    body: SkillIn, name: str = SeedName, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> Skill:
    """A skill's whole SKILL.md (a shipped skill edited becomes the persona's own), or a new skill."""
    return persona.write_skill(services, house, name, body.text, services.clock())


@router.get(
    "/export",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/gzip": {}}, "description": "persona/, data/, manifest.json"},
        **errors(404, (409, "the database is PostgreSQL (export it with pg_dump)")),
    },
)
async def export_persona(background: BackgroundTasks, services: WebServices = Depends(get_services)) -> FileResponse:
    """The whole persona as one tar.gz: its directory, its database (a consistent snapshot), its vectors."""
    path, filename = await run_in_threadpool(persona.export_archive, services, services.clock())
    background.add_task(path.unlink, missing_ok=True)
    return FileResponse(path, media_type="application/gzip", filename=filename, background=background)


@router.post(
    "/import",
    response_model=Created,
    status_code=201,
    openapi_extra=UPLOAD,
    responses=errors(
        *UPLOAD_ERRORS,
        (413, "over 200 MB"),
        (415, "not tar.gz/zip"),
        (422, "an unsafe or unusable archive"),
        persona=False,
    ),
)
async def import_persona(request: Request) -> Created:
    """An exported persona (tar.gz or zip, at most 200 MB) as a new persona directory and data dir."""
    upload = await receive_upload(
        request, limit=persona.ARCHIVE_LIMIT, types=persona.ARCHIVE_TYPES, suffixes=persona.ARCHIVE_SUFFIXES
    )
    return await run_in_threadpool(persona.import_archive, upload, persona.personas_root())


@router.post(
    "/cards",
    response_model=Created,
    status_code=201,
    openapi_extra=UPLOAD,
    responses=errors(*UPLOAD_ERRORS, 404, (413, "over 10 MB"), (415, "not PNG/JSON"), (422, "not a character card")),
)
async def import_card(request: Request, services: WebServices = Depends(get_services)) -> Created:
    """A Tavern/SillyTavern character card (chara_card_v2/v3: JSON, or a PNG carrying it) as a new persona."""
    upload = await receive_upload(
        request, limit=persona.CARD_LIMIT, types=persona.CARD_TYPES, suffixes=(".png", ".json")
    )
    return await run_in_threadpool(persona.import_card, services, upload, persona.personas_root())
