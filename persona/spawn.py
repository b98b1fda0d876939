"""Spawn (HMP "Создание потомков"): a child persona made from a parent — its own persona directory, its own database
(SQLite under its own data dir, or a PostgreSQL database) and its own vectors — in one of three kinds:

| mode      | persona files                         | memory                                                         |
| clone     | the parent's, renamed                 | all of it, ids kept, and the vectors copied (no re-embedding)  |
| trained   | the parent's, renamed                 | HMP's "cognitive diaries, semantic graphs, known agents": the  |
|           |                                       | diary, concepts and links, peers; goals and tasks, llm_memory, |
|           |                                       | insights, its own tuned settings — no episodes, conversation   |
|           |                                       | or notes                                                       |
| newborn   | the parent's, with a fresh identity   | none                                                           |

The child records its parent (`lineage/parent` in its config table) and the parent its children
(`lineage/children`). Nothing is written over: the child's directory must not exist and its database must hold no
memory; a failure part-way removes the child's directory again.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memory import Database
from memory.repositories.transfer import copy_memory, holds_memory
from persona.loader import PersonaError, default_persona_dir, load_persona
from persona.scaffold import TEXT_SUFFIXES, check_name

MODES = ("clone", "trained", "newborn")
FRESH_FILES = ("IDENTITY.md", "MEMORY.md")  # a newborn's: the default persona's, renamed (who it is, what it keeps)


class SpawnError(ValueError):
    pass


@dataclass
class SpawnReport:
    name: str
    mode: str
    persona_dir: str
    database: str
    parent: dict[str, Any]
    rows: dict[str, int] = field(default_factory=dict)
    vectors: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "persona_dir": self.persona_dir,
            "database": self.database,
            "parent": self.parent,
            "rows": self.rows,
            "rows_total": sum(self.rows.values()),
            "vectors": self.vectors,
            "notes": self.notes,
        }


def _rename(path: Path, old: str, new: str) -> None:
    for file in path.rglob("*"):
        if file.is_file() and file.suffix in TEXT_SUFFIXES and old:
            text = file.read_text(encoding="utf-8")
            changed = re.sub(rf"\b{re.escape(old)}\b", new, text)
            if changed != text:
                file.write_text(changed, encoding="utf-8")


def _set_name(config: Path, name: str) -> None:
    """config.yaml's `name:` line set to the child's name (added when there is none)."""
    lines = config.read_text(encoding="utf-8").splitlines() if config.exists() else []
    for i, line in enumerate(lines):
        if re.match(r"^name\s*:", line):
            lines[i] = f"name: {name}"
            break
    else:
        lines.insert(0, f"name: {name}")
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")


def spawn_files(parent_dir: Path, child_dir: Path, name: str, mode: str) -> str:
    """The child's persona directory; returns the parent's name."""
    parent = load_persona(parent_dir)
    shutil.copytree(parent.directory, child_dir, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    if mode == "newborn":
        default = load_persona(default_persona_dir())
        for file in FRESH_FILES:
            source = default.directory / file
            if source.exists():
                shutil.copyfile(source, child_dir / file)
        _rename(child_dir, default.display_name, name)
    _rename(child_dir, parent.display_name, name)
    _set_name(child_dir / "config.yaml", name)
    load_persona(child_dir)  # the child's files must load, or nothing is kept
    return parent.display_name


def copy_vectors(parent_index: Any, child_index: Any, page: int = 2000) -> int:
    """A clone's vectors, record for record (ids are item ids, kept by the copy), and the journal position they
    stand for: the child searches at once, with nothing re-embedded."""
    parent_index.sync(flush=True)
    source, target = parent_index.collection, child_index.collection
    copied, offset = 0, 0
    while True:
        got = source.get(limit=page, offset=offset, include=["embeddings", "metadatas"])
        ids = got["ids"]
        if not ids:
            break
        target.upsert(ids=ids, embeddings=got["embeddings"], metadatas=got["metadatas"])
        copied += len(ids)
        offset += len(ids)
    target.modify(metadata=dict(source.metadata or {}))
    return copied


def spawn(
    name: str,
    mode: str,
    *,
    parent_dir: Path,
    parent_db: Database,
    child_dir: Path,
    child_db: Database,
    now: datetime,
    parent_index: Any = None,
    child_index: Any = None,
    progress: Callable[[str], None] | None = None,
) -> SpawnReport:
    """Make the child (see the module doc). `child_db` is the child's database, new and empty; with both indexes a
    clone's vectors are copied."""
    say = progress or (lambda _: None)
    check_name(name)
    if mode not in MODES:
        raise SpawnError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if child_dir.exists():
        raise SpawnError(f"{child_dir} exists already; nothing was changed")
    with child_db.session() as session:
        if holds_memory(session):
            raise SpawnError(
                f"the child's database ({child_db.url}) holds a persona's memory already; nothing was changed"
            )
    try:
        parent_name = spawn_files(parent_dir, child_dir, name, mode)
    except (PersonaError, OSError) as exc:
        shutil.rmtree(child_dir, ignore_errors=True)
        raise SpawnError(f"the child's persona files: {exc}") from exc
    say(f"persona files copied to {child_dir}")
    lineage = {
        "name": parent_name,
        "persona_dir": str(Path(parent_dir).resolve()),
        "database": parent_db.url,
        "mode": mode,
        "spawned_at": now.isoformat(),
    }
    report = SpawnReport(
        name=name, mode=mode, persona_dir=str(child_dir.resolve()), database=child_db.url, parent=lineage
    )
    try:
        with parent_db.session() as source, child_db.unit() as repos:
            report.rows = copy_memory(
                source, repos.session, mode, lambda table, n: say(f"{table}: {n} row(s)") if n else None
            )
            repos.config.lineage_parent = lineage
            repos.config.persona_dir = str(child_dir.resolve())
        if mode == "clone" and parent_index is not None and child_index is not None:
            report.vectors = copy_vectors(parent_index, child_index)
            say(f"{report.vectors} vector(s) copied")
        elif mode == "trained" and report.rows.get("memory_items"):
            report.notes.append(f"{report.rows['memory_items']} memories are embedded again on the child's first run")
        with parent_db.unit() as repos:
            children = repos.config.lineage_children
            children.append(
                {
                    "name": name,
                    "mode": mode,
                    "persona_dir": report.persona_dir,
                    "database": child_db.url,
                    "spawned_at": now.isoformat(),
                }
            )
            repos.config.lineage_children = children
    except Exception:
        shutil.rmtree(child_dir, ignore_errors=True)
        raise
    return report


@dataclass
class Places:
    persona_dir: Path
    data_dir: Path
    db_url: str | None  # None: SQLite in data_dir


def default_places(
    name: str, parent_dir: Path, parent_data_dir: Path, parent_db: Database, *, create_database: bool = True
) -> Places:
    """Where a child goes when nobody says: its persona directory beside the parent's (under `personas/` when the
    parent is the shipped persona), its data dir beside the parent's (`data` → `data-mira`), and on PostgreSQL a
    new database beside the parent's (`anima` → `anima_mira`; created here unless `create_database` is False)."""
    from persona.scaffold import slug

    tag = slug(name)
    parent_dir = Path(parent_dir).resolve()
    shipped = parent_dir == default_persona_dir().resolve()
    persona_dir = (Path("personas") if shipped else parent_dir.parent) / tag
    parent_data_dir = Path(parent_data_dir).resolve()
    data_dir = parent_data_dir.parent / f"{parent_data_dir.name}-{tag}"
    db_url = None
    if parent_db.is_postgres and create_database:
        from memory.repositories.transfer import create_postgres_database

        current = parent_db.engine.url.database or "anima"
        db_url = create_postgres_database(parent_db.libpq_url(), f"{current}_{tag.replace('-', '_')}"[:63])
    return Places(persona_dir=persona_dir, data_dir=data_dir, db_url=db_url)
