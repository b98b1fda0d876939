"""Persona: edit its files (bootstrap files, seed.txt, ethics.yaml), config.yaml (refused with file:line when the
settings loader refuses it), named seeds (save, load, apply) and skills; export it, import an archive or a
character card as a new persona."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from i18n import N_
from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.services import persona
from web.templating import render, translated
from web.uploads import receive_upload

router = APIRouter(prefix="/persona")
EDITOR = "fragments/persona_editor.html"
Name = Path(max_length=64)


def _editor(
    request: Request,
    *,
    title: str,
    action: str,
    text: str,
    cap: int | None = None,
    saved: str = "",
    kind: str = "file",
    name: str = "",
    editable: bool = True,
) -> HTMLResponse:
    return render(
        request,
        EDITOR,
        editor={
            "title": title,
            "action": action,
            "text": text,
            "cap": cap,
            "saved": saved,
            "kind": kind,
            "name": name,
            "editable": editable,
        },
    )


@router.get("")
def persona_page(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(
        request,
        "pages/persona.html",
        "persona",
        overview=persona.overview(services, house),
        seeds=persona.seeds(services),
        skills=persona.skills(services),
    )


@router.get("/files/{name}")
def file_editor(request: Request, name: str = Name, services: WebServices = Depends(get_services)) -> HTMLResponse:
    f = persona.read_file(services, name)
    return _editor(
        request,
        title=name,
        action=f"/persona/files/{name}",
        text=f.text,
        cap=f.cap,
        editable=persona.may_edit(services),
    )


@router.put("/files/{name}")
def save_file(
    request: Request,
    name: str = Name,
    text: str = Form("", max_length=200_000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    f = persona.write_file(services, house, name, text, services.clock())
    return _editor(
        request,
        title=name,
        action=f"/persona/files/{name}",
        text=f.text,
        cap=f.cap,
        saved=translated(request, N_("%(name)s saved"), name=name),
    )


@router.get("/config")
def config_editor(request: Request, services: WebServices = Depends(get_services)) -> HTMLResponse:
    return _editor(
        request,
        title="config.yaml",
        action="/persona/config",
        text=persona.read_config(services).text,
        editable=persona.may_edit(services),
    )


@router.put("/config")
def save_config(
    request: Request,
    text: str = Form("", max_length=200_000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    saved = persona.write_config(services, house, text, services.clock())
    return _editor(
        request,
        title="config.yaml",
        action="/persona/config",
        text=saved.text,
        saved=translated(request, N_("%(name)s saved"), name="config.yaml"),
    )


@router.get("/seeds/{name}")
def seed_editor(request: Request, name: str = Name, services: WebServices = Depends(get_services)) -> HTMLResponse:
    seed = persona.read_seed(services, name)
    return _editor(
        request,
        title=f"seed “{name}”",
        action="/persona/seeds",
        text=seed.text,
        kind="seed",
        name=name,
        editable=persona.may_edit(services),
    )


@router.post("/seeds")
def save_seed(
    request: Request,
    name: str = Form(..., max_length=64),
    text: str = Form("", max_length=20_000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    """Save the editor's text under a name (its seed.txt when the editor is empty)."""
    persona.save_seed(services, house, name, text or None, services.clock())
    return render(
        request,
        "fragments/persona_seeds.html",
        seeds=persona.seeds(services),
        saved=translated(request, N_("seed %(name)s saved"), name=name),
    )


@router.post("/seeds/{name}/apply")
def apply_seed(
    request: Request, name: str = Name, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    persona.apply_seed(services, house, name, services.clock())
    return render(
        request,
        "fragments/persona_seeds.html",
        seeds=persona.seeds(services),
        saved=translated(request, N_("seed.txt is now the seed %(name)s"), name=name),
    )


@router.get("/skills/{name}")
def skill_editor(request: Request, name: str = Name, services: WebServices = Depends(get_services)) -> HTMLResponse:
    skill = next((s for s in persona.skills(services) if s.name == name), None)
    text = skill.text if skill else f"---\nname: {name}\ndescription: \ninvocation: manual\n---\n"
    return _editor(
        request,
        title=f"skill {name}",
        action=f"/persona/skills/{name}",
        text=text,
        kind="skill",
        editable=persona.may_edit(services),
    )


@router.put("/skills/{name}")
def save_skill(
    request: Request,
    name: str = Name,
    text: str = Form(..., max_length=30_000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    skill = persona.write_skill(services, house, name, text, services.clock())
    return _editor(
        request,
        title=f"skill {name}",
        action=f"/persona/skills/{name}",
        text=skill.text,
        kind="skill",
        saved=translated(request, N_("skill %(name)s saved"), name=name),
    )


@router.post("/import")
async def import_archive(request: Request) -> HTMLResponse:
    upload = await receive_upload(
        request, limit=persona.ARCHIVE_LIMIT, types=persona.ARCHIVE_TYPES, suffixes=persona.ARCHIVE_SUFFIXES
    )
    created = await run_in_threadpool(persona.import_archive, upload, persona.personas_root())
    return render(request, "fragments/persona_created.html", created=created)


@router.post("/cards")
async def import_card(request: Request, services: WebServices = Depends(get_services)) -> HTMLResponse:
    upload = await receive_upload(
        request, limit=persona.CARD_LIMIT, types=persona.CARD_TYPES, suffixes=(".png", ".json")
    )
    created = await run_in_threadpool(persona.import_card, services, upload, persona.personas_root())
    return render(request, "fragments/persona_created.html", created=created)
