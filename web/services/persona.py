"""Persona: the human edits the persona's files — bootstrap files, seed.txt and named seeds, config.yaml (checked
by the settings loader before it is written: a broken edit is refused with its file:line, the file on disk stays as
it was), ethics.yaml, skills. The human acting is not the persona acting: no consent gate, but every edit is
recorded (the process log the persona reads once, and a history the page shows). Export the whole persona (files,
database, vectors) as one archive and import one elsewhere; import a Tavern/SillyTavern character card as a new
persona. The shipped default persona is read-only: make one of your own first (`run.py persona new`, a card, an
archive)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

from graph.catalogue import unknown_commands
from i18n import N_
from managers import Managers
from memory import Database
from memory.db import DatabaseOpenError, SchemaError
from persona import PersonaError, default_persona_dir, load_persona
from persona.archive import ArchiveError, extract_archive, write_archive
from persona.cards import CardError, card_files, is_png, read_card
from persona.ethics import EthicsError, load_ethics
from persona.loader import BOOTSTRAP_ORDER, FILE_CAP, TOTAL_CAP
from persona.scaffold import NAME_PATTERN, free_directory, scaffold_persona, slug
from persona.settings import SettingsError, load_settings
from persona.skills import MAX_SKILL_CHARS, SkillError, parse_skill
from persona.skills import Skill as LoadedSkill
from persona.yaml_lines import YamlError, parse_lined_yaml
from web.context import WebServices
from web.errors import NotFoundError, ServiceError
from web.schemas.persona import (
    ConfigFile,
    Created,
    Edit,
    PersonaFile,
    PersonaOverview,
    Seed,
    SeedList,
    SeedSummary,
    Skill,
)
from web.security import web_actor
from web.uploads import Upload

FILES = (*BOOTSTRAP_ORDER, "seed.txt", "ethics.yaml")
SEED_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
CARD_LIMIT = 10 * 1024 * 1024
ARCHIVE_LIMIT = 200 * 1024 * 1024
UNPACKED_LIMIT = 4 * ARCHIVE_LIMIT
CARD_TYPES = ("image/png", "application/json", "text/json")
ARCHIVE_TYPES = (
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/zip",
    "application/x-zip-compressed",
    "application/x-compressed-tar",
)
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


def personas_root() -> Path:
    """Where new personas go (cards, archives): `personas/` as for `run.py persona new`, or the `personas_root`
    setting (ANIMA_PERSONAS_ROOT)."""
    return Path(load_settings().personas_root).expanduser().resolve()


# -- where, and whether it may be edited ----------------------------------------------------------------------


def directory(services: WebServices) -> Path:
    return services.persona().directory


def editable(path: Path) -> bool:
    return path.resolve() != default_persona_dir().resolve()


def _named_by_the_run(services: WebServices) -> bool:
    return services.settings().persona_named


def may_edit(services: WebServices) -> bool:
    """Whether the editors take edits: a persona of one's own, or the shipped default this data dir adopts on the
    first edit — not the default a run names explicitly (`--persona`)."""
    return editable(directory(services)) or not _named_by_the_run(services)


def _writable(services: WebServices, house: Managers) -> Path:
    """The persona's directory, ready for an edit. The shipped default is never edited in place: the first edit
    copies it into the data dir, which runs with that copy from then on (the loop moves to it at its next tick)."""
    path = directory(services)
    if editable(path):
        return path
    if _named_by_the_run(services):
        raise ServiceError(
            "this run names the shipped default persona (--persona): it is not edited in place; make "
            "one of your own (import a character card or an archive here, or `run.py persona new NAME`)",
            field="persona",
            status=409,
        )
    own = Path(services.settings().data_dir).expanduser().resolve() / "persona"
    if not own.exists():
        shutil.copytree(path, own)
    house.persona.adopt_directory(own)
    services.forget_persona()
    return own


def _write(path: Path, text: str) -> None:
    """Atomically: a reader (the loop) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _record(services: WebServices, house: Managers, what: str, now: datetime) -> None:
    if services.store_files is not None:  # a deployed persona: every worker takes the edited files at its next job
        services.store_files(directory(services))
    house.persona.record_edit(what, by=web_actor(services.api_token), now=now)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    except UnicodeDecodeError:
        raise ServiceError(f"{path.name} is not UTF-8 text", field="name", status=422) from None


# -- overview and files ------------------------------------------------------------------------------------


def overview(services: WebServices, house: Managers) -> PersonaOverview:
    persona = services.persona()
    return PersonaOverview(
        name=persona.display_name,
        directory=str(persona.directory),
        editable=editable(persona.directory),
        files=[_file(persona.directory, name) for name in FILES],
        truncated=list(persona.truncated),
        skills=[s.name for s in persona.skills],
        seeds=[s.name for s in seeds(services).items],
        edits=[Edit(**e.model_dump()) for e in house.persona.edits(20)],
    )


def _file_name(name: str) -> str:
    if name not in FILES:
        raise NotFoundError(
            f"{name!r} is not a persona file (one of {', '.join(FILES)}; config.yaml at /api/persona/config)",
            field="name",
        )
    return name


def read_file(services: WebServices, name: str) -> PersonaFile:
    return _file(directory(services), _file_name(name))


def _file(root: Path, name: str) -> PersonaFile:
    path = root / name
    text = _read(path)
    return PersonaFile(name=name, text=text, chars=len(text), cap=FILE_CAP, exists=path.exists())


def write_file(services: WebServices, house: Managers, name: str, text: str, now: datetime) -> PersonaFile:
    root = directory(services)  # checked here; the shipped default is adopted only for an edit that passes
    _file_name(name)
    if len(text) > FILE_CAP:
        raise ServiceError(
            f"{name} may hold at most {FILE_CAP} characters (the loader cuts the rest); this has {len(text)}",
            field="text",
            status=422,
        )
    if name in BOOTSTRAP_ORDER:
        others = sum(min(len(_read(root / n)), FILE_CAP) for n in BOOTSTRAP_ORDER if n != name)
        if others + len(text) > TOTAL_CAP:
            raise ServiceError(
                f"the bootstrap files may hold {TOTAL_CAP} characters together; with this {name} "
                f"they would hold {others + len(text)}",
                field="text",
                status=422,
            )
    if name == "ethics.yaml":
        with tempfile.TemporaryDirectory() as scratch:
            (Path(scratch) / name).write_text(text, encoding="utf-8")
            try:
                load_ethics(Path(scratch) / name)
            except EthicsError as exc:
                raise ServiceError(str(exc), field="text", status=422) from None
    root = _writable(services, house)
    _write(root / name, text)
    saved = _file(root, name)
    _record(services, house, name, now)  # last: nothing after it opens another transaction while this one writes
    return saved


# -- config.yaml --------------------------------------------------------------------------------------------


def read_config(services: WebServices) -> ConfigFile:
    return ConfigFile(text=_read(directory(services) / "config.yaml"), name=services.persona().display_name)


def check_config(services: WebServices, house: Managers, root: Path, text: str) -> None:
    """The settings loader's verdict on `text` as the persona's config.yaml (file:line errors) — before writing."""
    path = root / "config.yaml"
    try:
        lined = parse_lined_yaml(text, str(path), empty_ok=True)
        settings = load_settings(
            root,
            config=lined,
            self_changes=house.persona.self_changes(),
            overrides=services.overrides.replace(persona_dir=None),
        )
    except (YamlError, SettingsError) as exc:
        raise ServiceError(str(exc), field="text", status=422) from None
    unknown = unknown_commands(settings.consent.auto_approve)
    if unknown:  # as graph/services.check_consent_policy, with this text's line
        raise ServiceError(
            f"{lined.where(('consent', 'auto_approve'))}: no such command {', '.join(map(repr, unknown))}",
            field="text",
            status=422,
        )


def write_config(services: WebServices, house: Managers, text: str, now: datetime) -> ConfigFile:
    check_config(services, house, directory(services), text)  # a refused edit adopts nothing
    root = _writable(services, house)
    _write(root / "config.yaml", text)
    saved = read_config(services)
    _record(services, house, "config.yaml", now)
    return saved


# -- seeds ----------------------------------------------------------------------------------------------------


def _seed_path(root: Path, name: str) -> Path:
    if not re.fullmatch(SEED_NAME, name):
        raise ServiceError(
            N_("%(name)r is not a seed name (letters, digits, - and _; at most 64)"),
            name=name,
            field="name",
            status=422,
        )
    return root / "seeds" / f"{name}.txt"


def seeds(services: WebServices) -> SeedList:
    root = directory(services)
    items = []
    folder = root / "seeds"
    for path in sorted(folder.glob("*.txt")) if folder.is_dir() else []:
        if re.fullmatch(SEED_NAME, path.stem):
            text = _read(path)
            items.append(SeedSummary(name=path.stem, chars=len(text), preview=text[:160]))
    return SeedList(current=_read(root / "seed.txt"), items=items)


def read_seed(services: WebServices, name: str) -> Seed:
    path = _seed_path(directory(services), name)
    if not path.exists():
        raise NotFoundError(N_("no seed named %(name)r"), name=name, field="name")
    text = _read(path)
    return Seed(name=name, text=text, chars=len(text))


def save_seed(services: WebServices, house: Managers, name: str, text: str | None, now: datetime) -> Seed:
    """Save `text` (or, when None, the current seed.txt) under `name`."""
    root = _writable(services, house)
    path = _seed_path(root, name)
    text = _read(root / "seed.txt") if text is None else text
    if len(text) > FILE_CAP:
        raise ServiceError(f"a seed may hold at most {FILE_CAP} characters", field="text", status=422)
    _write(path, text)
    _record(services, house, f"the seed named {name}", now)
    return Seed(name=name, text=text, chars=len(text))


def apply_seed(services: WebServices, house: Managers, name: str, now: datetime) -> Seed:
    root = _writable(services, house)
    seed = read_seed(services, name)
    _write(root / "seed.txt", seed.text)
    _record(services, house, f"seed.txt (now the seed named {name})", now)
    return seed


# -- skills -----------------------------------------------------------------------------------------------------


def _skill(root: Path, skill: LoadedSkill) -> Skill:
    own = skill.path.resolve().is_relative_to((root / "skills").resolve())
    return Skill(
        name=skill.name,
        description=skill.description,
        invocation=skill.invocation,
        directory=skill.path.parent.name,
        own=own,
        text=_read(skill.path),
    )


def skills(services: WebServices) -> list[Skill]:
    persona = services.persona()
    return [_skill(persona.directory, s) for s in persona.skills]


def write_skill(services: WebServices, house: Managers, name: str, text: str, now: datetime) -> Skill:
    """Edit a skill's SKILL.md (a shipped skill becomes the persona's own, overriding it), or add a new one."""
    if not re.fullmatch(SEED_NAME, name):
        raise ServiceError(
            N_("%(name)r is not a skill name (letters, digits, - and _; at most 64)"),
            name=name,
            field="name",
            status=422,
        )
    if len(text) > MAX_SKILL_CHARS:
        raise ServiceError(f"a skill may hold at most {MAX_SKILL_CHARS} characters", field="text", status=422)
    current = next((s for s in services.persona().skills if s.name == name), None)
    folder = current.path.parent.name if current is not None else name
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / "SKILL.md"
        trial.write_text(text, encoding="utf-8")
        try:
            parsed = parse_skill(trial)
        except SkillError as exc:
            raise ServiceError(
                str(exc).replace(str(trial), f"skills/{folder}/SKILL.md"), field="text", status=422
            ) from None
    if parsed.name != name:
        raise ServiceError(f"the frontmatter names the skill {parsed.name!r}, not {name!r}", field="text", status=422)
    root = _writable(services, house)
    path = root / "skills" / folder / "SKILL.md"
    if current is not None and current.path.resolve().is_relative_to(root.resolve()):
        path = current.path  # its own (or a skills_dirs one inside the persona)
    _write(path, text)
    saved = _skill(root, parse_skill(path))
    _record(services, house, f"the skill {name}", now)
    return saved


# -- export, import, character cards ---------------------------------------------------------------------------


def export_archive(services: WebServices, now: datetime) -> tuple[Path, str]:
    """(a temporary tar.gz the caller streams and deletes, its download name)."""
    settings = services.settings()
    if services.db.is_postgres:
        raise ServiceError(
            "the database is PostgreSQL: export it with pg_dump (the archive holds a SQLite file)",
            field="format",
            status=409,
        )
    persona = services.persona()
    database = Path(services.db.engine.url.database or "")
    fd, temporary = tempfile.mkstemp(prefix="anima-persona-", suffix=".tar.gz")
    os.close(fd)
    name = slug(persona.display_name)
    try:
        write_archive(
            temporary,
            persona_dir=persona.directory,
            database=database if database.name else None,
            chroma_dir=Path(settings.data_dir).expanduser() / "chroma",
            manifest={
                "name": persona.display_name,
                "exported_at": now.isoformat(),
                "persona_dir": persona.directory.name,
            },
        )
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Path(temporary), f"{name}-{now:%Y%m%d-%H%M%S}.tar.gz"


def _is_archive(head: bytes) -> bool:
    return head[:2] == b"\x1f\x8b" or head[:4] == b"PK\x03\x04" or head[257:262] == b"ustar"


def import_archive(upload: Upload, root: Path) -> Created:
    """A new persona directory and data dir, side by side under `root/<name>/` (persona/, data/)."""
    upload.file.seek(0)
    head = upload.file.read(512)
    if not _is_archive(head):
        raise ServiceError(N_("not a persona archive (tar.gz, tar or zip)"), field="file", status=415)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=root, prefix=".upload-", suffix=".archive") as copy:
        upload.file.seek(0)
        shutil.copyfileobj(upload.file, copy)
        copy.flush()
        scratch = Path(tempfile.mkdtemp(dir=root, prefix=".import-"))
        staging = scratch / "unpacked"
        try:
            manifest = extract_archive(Path(copy.name), staging, max_bytes=UNPACKED_LIMIT)
        except ArchiveError as exc:
            shutil.rmtree(scratch, ignore_errors=True)
            raise ServiceError(N_("refused: %(exc)s"), exc=exc, field="file", status=422) from None
    try:
        persona = load_persona(staging / "persona")
        if (staging / "data").is_dir():
            Database.open(staging / "data").close()
    except (PersonaError, DatabaseOpenError, SchemaError) as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise ServiceError(
            N_("the archive's persona cannot be used: %(exc)s"), exc=exc, field="file", status=422
        ) from None
    name = str(manifest.get("name") or persona.display_name)
    target = free_directory(root, slug(name))
    os.replace(staging, target)
    shutil.rmtree(scratch, ignore_errors=True)
    (target / "data").mkdir(exist_ok=True)
    return Created(
        name=name,
        persona_dir=str(target / "persona"),
        data_dir=str(target / "data"),
        files=sorted(load_persona(target / "persona").files),
        command=f"python run.py --persona {target / 'persona'} --data-dir {target / 'data'}",
    )


def _card_name(raw: str) -> str:
    name = re.sub(r"[^\w .-]+", "", raw).strip(" .-")[:64].strip()
    if not re.fullmatch(NAME_PATTERN, name):
        raise ServiceError(N_("the card's name %(raw)r cannot name a persona"), raw=raw, field="file", status=422)
    return name


def import_card(services: WebServices, upload: Upload, root: Path) -> Created:
    raw = upload.read()
    if not (is_png(raw) or raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"):
        raise ServiceError(N_("a character card is a PNG or a JSON file"), field="file", status=415)
    try:
        card = read_card(raw)
    except CardError as exc:
        raise ServiceError(str(exc), field="file", status=422) from None
    name = _card_name(card.name)
    target = free_directory(root, slug(name))
    root.mkdir(parents=True, exist_ok=True)
    try:
        scaffold_persona(name, target)
        user = services.settings().user_name
        for file, text in card_files(card, name, user).items():
            _write(target / file, text[:FILE_CAP])
        config = (target / "config.yaml").read_text(encoding="utf-8")
        _write(
            target / "config.yaml", re.sub(r"(?m)^name:.*$", lambda _: f"name: {_yaml_string(name)}", config, count=1)
        )
        persona = load_persona(target)
    except (PersonaError, OSError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise ServiceError(
            N_("the card could not become a persona: %(exc)s"), exc=exc, field="file", status=422
        ) from None
    return Created(
        name=persona.display_name,
        persona_dir=str(target),
        files=sorted(persona.files),
        command=f"python run.py --persona {target}",
    )


def _yaml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML string
