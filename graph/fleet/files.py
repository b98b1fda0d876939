"""A deployment's persona files live in its database (the registry keeps each persona's directory as one archive), so
any worker on any machine runs any persona: it unpacks the archive into a cache directory named by its digest, and
unpacks again when the files changed (an edit in the web app stores them back)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from pathlib import Path

from persona.archive import archive_files, extract_archive, write_archive

MAX_BYTES = 64 * 1024 * 1024


def digest(directory: Path) -> str:
    """Of the files' names and contents (not of the archive, whose bytes carry times)."""
    sha = hashlib.sha256()
    for path in archive_files(directory):
        sha.update(path.relative_to(directory).as_posix().encode() + b"\0")
        sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()


def pack(directory: Path) -> tuple[bytes, str]:
    """(the persona directory as tar.gz, its digest)."""
    buffer = io.BytesIO()
    write_archive(
        buffer, persona_dir=directory, database=None, chroma_dir=None, manifest={"persona_dir": directory.name}
    )
    return buffer.getvalue(), digest(directory)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where a machine keeps its deployed personas' files: `cache_dir` (the `fleet_cache` setting, ANIMA_FLEET_CACHE),
    else ~/.cache/anima/fleet."""
    return Path(cache_dir or Path.home() / ".cache" / "anima" / "fleet").expanduser()


def materialize(name: str, files: bytes, files_digest: str, cache_dir: str | Path | None = None) -> Path:
    """The persona's directory in this machine's cache (unpacked once per version of its files)."""
    target = cache_root(cache_dir) / name / files_digest[:16]
    persona = target / "persona"
    if persona.is_dir():
        return persona
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        archive = Path(scratch) / "persona.tar.gz"
        archive.write_bytes(files)
        unpacked = Path(scratch) / "unpacked"
        extract_archive(archive, unpacked, max_bytes=MAX_BYTES)
        try:
            os.replace(unpacked, target)  # atomic: two workers unpacking at once both end with one whole copy
        except OSError:
            if not persona.is_dir():
                raise
    for old in target.parent.iterdir():  # earlier versions of its files
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return persona


def data_dir(name: str, cache_dir: str | Path | None = None) -> Path:
    """A persona's scratch directory on this machine (nothing durable goes there: its memory is in PostgreSQL)."""
    path = cache_root(cache_dir) / name / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path
