"""A whole persona as one archive: its directory (`persona/…`), its database (`data/anima.sqlite`, a consistent
SQLite snapshot), its Chroma vectors (`data/chroma/…`) and `manifest.json`. `write_archive` builds a tar.gz;
`extract_archive` takes a tar(.gz) or zip back, refusing any entry that would land outside its target (absolute
paths, `..`, links, devices: zip-slip) and archives that unpack past a size limit."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from persona.yaml_lines import UnreadableFile, YamlError, parse_yaml, read_text

MANIFEST = "manifest.json"
FORMAT = "anima-persona/1"
SKIP_NAMES = ("__pycache__", ".DS_Store")
DB_FILE = "anima.sqlite"


class ArchiveError(ValueError):
    pass


def archive_files(root: Path) -> Iterator[Path]:
    """The files an archive of `root` holds (no caches, no links, no secrets: `secret_files`), in order."""
    secrets = secret_files(root)
    for path in sorted(root.rglob("*")):
        if any(part in SKIP_NAMES for part in path.relative_to(root).parts) or path.is_symlink():
            continue
        if path.is_file() and path.resolve() not in secrets and not _looks_secret(path.name):
            yield path


def secret_files(root: Path) -> set[Path]:
    """The channels' `secrets_file`s that config.yaml names (relative ones against `root` and the working
    directory): never archived — an export, or a deployment's copy of the persona in its database, holds no secret."""
    try:
        config = parse_yaml(read_text(root / "config.yaml"), "config.yaml") if (root / "config.yaml").exists() else {}
    except (UnreadableFile, YamlError):
        return set()
    channels = config.get("channels") if isinstance(config, dict) else None
    entries = channels.get("entries") if isinstance(channels, dict) else None
    found: set[Path] = set()
    for entry in entries if isinstance(entries, list) else []:
        named = entry.get("secrets_file") if isinstance(entry, dict) else None
        if isinstance(named, str) and named.strip():
            path = Path(named).expanduser()
            found |= {path.resolve(), (root / path).resolve()}
    return found


def _looks_secret(name: str) -> bool:
    """A file named like a secrets file (`secrets.yaml`, `.env`): left out even when config.yaml does not name it."""
    lowered = name.lower()
    return "secret" in lowered or lowered == ".env" or lowered.startswith(".env.")


def sqlite_snapshot(database: Path, out: Path) -> None:
    """A consistent copy of a live SQLite database (the backup API: safe while the loop writes), without the sealed
    secrets (memory/secrets.py: even sealed, a persona's keys never leave in an export)."""
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    target = sqlite3.connect(out)
    try:
        source.backup(target)
        try:
            target.execute("DELETE FROM sealed_secrets")
            target.commit()
        except sqlite3.OperationalError:  # a database from before the table
            pass
    finally:
        target.close()
        source.close()


def write_archive(
    out: str | Path | IO[bytes],
    *,
    persona_dir: Path,
    database: Path | None,
    chroma_dir: Path | None,
    manifest: dict[str, Any],
) -> None:
    """Write the archive (tar.gz) to `out` (a path or a binary file)."""
    kwargs = {"name": str(out)} if isinstance(out, (str, Path)) else {"fileobj": out}
    with tarfile.open(mode="w:gz", **kwargs) as tar, tempfile.TemporaryDirectory() as scratch:
        body = json.dumps({"format": FORMAT, **manifest}, indent=2, ensure_ascii=False).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for path in archive_files(persona_dir):
            tar.add(path, f"persona/{path.relative_to(persona_dir).as_posix()}", recursive=False)
        if database is not None and database.exists():
            copy = Path(scratch) / DB_FILE
            sqlite_snapshot(database, copy)
            tar.add(copy, f"data/{DB_FILE}", recursive=False)
        if chroma_dir is not None and chroma_dir.is_dir():
            for path in archive_files(chroma_dir):
                tar.add(path, f"data/chroma/{path.relative_to(chroma_dir).as_posix()}", recursive=False)


@dataclass
class Entry:
    name: str
    size: int
    is_dir: bool
    read: Any  # () -> binary file


def _safe_name(name: str) -> PurePosixPath:
    if "\\" in name or "\0" in name:
        raise ArchiveError(f"unsafe path in the archive: {name!r}")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise ArchiveError(f"unsafe path in the archive: {name!r} (it would land outside the persona)")
    return path


def _entries(source: Path) -> Iterator[Entry]:
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise ArchiveError(f"the archive holds a link: {info.filename!r}")
                yield Entry(info.filename, info.file_size, info.is_dir(), lambda i=info: archive.open(i))
        return
    if not tarfile.is_tarfile(source):
        raise ArchiveError("not a zip or tar(.gz) archive")
    with tarfile.open(source, mode="r:*") as archive:
        for member in archive:
            if not (member.isfile() or member.isdir()):
                raise ArchiveError(f"the archive holds a link or device: {member.name!r}")
            yield Entry(member.name, member.size, member.isdir(), lambda m=member: archive.extractfile(m))


def extract_archive(source: Path, into: Path, *, max_bytes: int) -> dict[str, Any]:
    """Unpack `source` into the new directory `into` (persona/, data/); returns the manifest. Nothing is left
    behind when it is refused."""
    if into.exists():
        raise ArchiveError(f"{into} already exists")
    into.mkdir(parents=True)
    total = 0
    manifest: dict[str, Any] = {}
    try:
        for entry in _entries(source):
            path = _safe_name(entry.name)
            if not path.parts:
                continue
            if path.parts[0] not in ("persona", "data") and str(path) != MANIFEST:
                raise ArchiveError(
                    f"unexpected entry {entry.name!r} (a persona archive holds manifest.json, persona/ and data/)"
                )
            target = into.joinpath(*path.parts)
            if os.path.commonpath([into.resolve(), target.resolve()]) != str(into.resolve()):
                raise ArchiveError(f"unsafe path in the archive: {entry.name!r}")
            if entry.is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += entry.size
            if total > max_bytes:
                raise ArchiveError(f"the archive unpacks to more than {max_bytes} bytes")
            target.parent.mkdir(parents=True, exist_ok=True)
            with entry.read() as reader, open(target, "wb") as writer:
                written = 0
                while chunk := reader.read(1 << 20):
                    written += len(chunk)
                    if written > entry.size or total - entry.size + written > max_bytes:
                        raise ArchiveError(f"{entry.name!r} unpacks past its declared size")
                    writer.write(chunk)
        if (into / MANIFEST).exists():
            try:
                manifest = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ArchiveError(f"manifest.json is not JSON ({exc})") from None
            (into / MANIFEST).unlink()
        if not (into / "persona").is_dir():
            raise ArchiveError("the archive holds no persona/ directory")
    except (ArchiveError, zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        shutil.rmtree(into, ignore_errors=True)
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"unreadable archive ({exc})") from None
    return manifest if isinstance(manifest, dict) else {}
