"""A watched folder of Markdown notes — an Obsidian vault — kept in the knowledge base (HMP "Локальные файлы и
хранилища": Obsidian, Logseq, Joplin through synchronised directories and parsing Markdown).

How it watches: a poll by file time, between ticks (graph/loop/autonomy.py, every `tools.vault_every_s`), not an
inotify watcher (watchdog). A vault is usually a synchronised folder (Obsidian Sync, Syncthing, a network share),
where inotify misses what another machine wrote and editors replace files by renames; a poll of each file's
modification time and size costs one `stat` per note, needs no thread of its own, and sees every change however it
came. What it remembers per file (time, size, document) is in the config table (`vault/files`).

What a note becomes: its YAML frontmatter is read — `title` (else the file name), `tags` and `aliases` — and left
out of the text; Obsidian's links become their words (`[[Target|shown]]` → "shown", `[[Target]]` → "Target",
`![[embed]]` → "embed") and the targets are kept as the chunks' tags (`link:Target`), as are the note's tags and
its inline `#tags`. A new file is ingested, a changed one replaces its document (old chunks removed: their
full-text documents and vectors too), a deleted one removes it. Only `*.md`, outside hidden folders (`.obsidian`,
`.trash`, `.git`).

Everything in it is data: its chunks are knowledge-base text, fenced as data in a prompt and untrusted for the
consent gate (memory/provenance.py origin `kb`). The operator names the folder (config.yaml `tools.vault`); the
persona may ask to sync now (`vault.sync`, external: it reads outside its data dir)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from memory.knowledge import split_document

if TYPE_CHECKING:
    from managers import Managers
    from memory import Database
    from persona.settings import Settings

SOURCE = "vault"
FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
WIKILINK = re.compile(r"!?\[\[([^\]|#^]+)(?:[#^][^\]|]*)?(?:\|([^\]]+))?\]\]")
INLINE_TAG = re.compile(r"(?<![\w#/])#([A-Za-z][\w/-]{0,60})")
MAX_FILE_BYTES = 2_000_000


class VaultError(ValueError):
    """No vault named, or not a folder."""


@dataclass
class VaultNote:
    title: str
    text: str
    tags: list[str]
    links: list[str]


@dataclass
class VaultReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)  # unreadable, too big, or the same text as another note

    def line(self) -> str:
        return (
            f"vault: {len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
            f"{self.unchanged} unchanged" + (f", {len(self.skipped)} skipped" if self.skipped else "")
        )


def parse_note(raw: str, name: str) -> VaultNote:
    """A Markdown note as the knowledge base keeps it (module doc)."""
    meta: dict[str, Any] = {}
    found = FRONTMATTER.match(raw)
    body = raw
    if found:
        try:
            loaded = yaml.safe_load(found.group(1))
            meta = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError:
            meta = {}
        body = raw[found.end() :]
    title = str(meta.get("title") or name).strip()[:300] or name

    def listed(value: Any, separators: str = r"[,\s]+") -> list[str]:
        if isinstance(value, str):
            return [v.strip() for v in re.split(separators, value) if v.strip()]
        return [str(v).strip() for v in value or [] if str(v).strip()] if isinstance(value, list) else []

    links: list[str] = []

    def link(match: re.Match[str]) -> str:
        target = match.group(1).strip()
        links.append(target)
        return (match.group(2) or target).strip()

    text = WIKILINK.sub(link, body)
    tags = [t.lstrip("#") for t in listed(meta.get("tags"))] + INLINE_TAG.findall(text)
    aliases = listed(meta.get("aliases"), r",")  # an alias may have spaces; a tag has none
    header = title + (f" (also: {', '.join(aliases)})" if aliases else "")
    return VaultNote(
        title=title,
        text=f"{header}\n\n{text.strip()}".strip(),
        tags=list(dict.fromkeys(tags)),
        links=list(dict.fromkeys(links)),
    )


def _notes(folder: Path) -> dict[str, Path]:
    """relative path -> file, for every Markdown note outside hidden folders."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.md")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        found[relative.as_posix()] = path
    return found


class VaultManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def folder(self, path: str | None = None) -> Path:
        settings = self.house.deps.settings
        where = path or settings.tools.vault
        if not where:
            raise VaultError("no vault: set tools.vault in config.yaml to a folder of Markdown notes")
        folder = Path(where).expanduser().resolve()
        if not folder.is_dir():
            raise VaultError(f"{folder} is not a folder")
        return folder

    def sync(self, path: str | None = None) -> VaultReport:
        """The folder's notes into the knowledge base: new, changed and deleted files since the last look."""
        folder = self.folder(path)
        kb = self.repos.kb
        state = self.repos.config.vault_files
        known = {k: v for k, v in state.items() if k.startswith(f"{folder}::")}
        report = VaultReport()
        files = _notes(folder)
        for relative, file in files.items():
            key = f"{folder}::{relative}"
            stat = file.stat()
            seen = known.pop(key, None)
            if seen is not None and seen[:2] == [stat.st_mtime_ns, stat.st_size]:
                report.unchanged += 1
                continue
            if seen is not None:
                self._drop(int(seen[2]))
            if stat.st_size > MAX_FILE_BYTES:
                report.skipped.append(relative)
                state.pop(key, None)
                continue
            try:
                note = parse_note(file.read_text(encoding="utf-8"), file.stem)
            except (OSError, UnicodeDecodeError):
                report.skipped.append(relative)
                state.pop(key, None)
                continue
            digest = hashlib.sha256(note.text.encode("utf-8")).hexdigest()
            pieces = split_document(note.text)
            if not pieces or kb.by_hash(digest) is not None:
                report.skipped.append(relative)
                state[key] = [stat.st_mtime_ns, stat.st_size, 0]
                continue
            doc = kb.add(
                str(file),
                note.title,
                digest,
                pieces,
                source=SOURCE,
                tags=[SOURCE, *note.tags, *(f"link:{target}" for target in note.links)],
            )
            state[key] = [stat.st_mtime_ns, stat.st_size, doc.id]
            (report.changed if seen is not None else report.added).append(relative)
        for key, seen in known.items():  # files that are gone
            self._drop(int(seen[2]))
            state.pop(key, None)
            report.removed.append(key.split("::", 1)[1])
        self.repos.config.vault_files = state
        return report

    def _drop(self, doc_id: int) -> None:
        if doc_id:
            try:
                self.repos.kb.remove(doc_id)
            except LookupError:  # removed by hand meanwhile
                pass


def sync_vault(db: Database, settings: Settings, clock: Callable[[], datetime]) -> VaultReport | None:
    """Between ticks (graph/loop/autonomy.py): the configured vault synced in one unit; None when there is none."""
    from managers import ManagerDeps, Managers

    if not settings.tools.vault:
        return None
    with db.unit() as repos:
        return Managers(repos, ManagerDeps(settings=settings, clock=clock)).vault.sync()


__all__ = ["VaultError", "VaultManager", "VaultNote", "VaultReport", "parse_note", "sync_vault"]
