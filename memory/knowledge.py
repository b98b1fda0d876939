"""Knowledge base ingestion (Nexus Ark rag_index): txt/md/pdf files, chunked and indexed as tier `kb`.

Chunks follow paragraphs and are packed up to `CHUNK_CHARS` (a paragraph longer than that is split at
sentence ends), with the previous chunk's tail as lexical context through the episode link. A file whose
content is already in the knowledge base (same SHA-256) is skipped, so `kb add` can be re-run safely.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from memory.repositories import Repos
from memory.text import sentences

CHUNK_CHARS = 800
SUPPORTED = (".txt", ".md", ".markdown", ".pdf")


class KnowledgeError(ValueError):
    pass


@dataclass
class Ingested:
    path: str
    doc_id: int | None
    chunks: int
    skipped: str | None = None


def read_document(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise KnowledgeError(f"{path}: unsupported file type {suffix or '(none)'}; use {', '.join(SUPPORTED)}")
    if suffix == ".pdf":
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError

        try:
            reader = PdfReader(str(path))
            pages = [page.extract_text() or "" for page in reader.pages]
        except (PdfReadError, OSError, ValueError) as exc:
            raise KnowledgeError(f"{path}: not a readable PDF ({exc})") from exc
        return "\n\n".join(pages)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return path.read_text(encoding="latin-1")


def split_document(text: str, size: int = CHUNK_CHARS) -> list[str]:
    paragraphs = [p.strip() for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
    pieces: list[str] = []
    for paragraph in paragraphs:
        if len(paragraph) <= size:
            pieces.append(paragraph)
            continue
        current = ""
        for sentence in sentences(paragraph, min_words=1):
            while len(sentence) > size:  # one enormous "sentence" (tables, code): hard cut
                pieces.append(sentence[:size])
                sentence = sentence[size:]
            if current and len(current) + 1 + len(sentence) > size:
                pieces.append(current)
                current = sentence
            else:
                current = f"{current} {sentence}".strip()
        if current:
            pieces.append(current)
    packed: list[str] = []
    for piece in pieces:  # small paragraphs travel together
        if packed and len(packed[-1]) + 2 + len(piece) <= size:
            packed[-1] = f"{packed[-1]}\n\n{piece}"
        else:
            packed.append(piece)
    return packed


def ingest(repos: Repos, path: Path, *, source: str = "", author: str = "") -> Ingested:
    """`path` into the knowledge base; `source`: who gave it and how (empty: the owner), kept with the document;
    `author`: their name, each chunk's author."""
    path = path.expanduser().resolve()
    if not path.is_file():
        raise KnowledgeError(f"{path}: no such file")
    text = read_document(path)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    existing = repos.kb.by_hash(digest)
    if existing is not None:
        return Ingested(
            str(path), existing.id, existing.chunks, skipped=f"already in the knowledge base as document {existing.id}"
        )
    pieces = split_document(text)
    if not pieces:
        raise KnowledgeError(f"{path}: no text found")
    doc = repos.kb.add(str(path), path.stem, digest, pieces, source=source, author=author)
    return Ingested(str(path), doc.id, len(pieces))
