"""`run.py kb add|list|search|remove`: the knowledge base — documents the persona can search (txt, md, pdf).

Removing a document is the human's delete: it is hard (the persona's own deletes only archive)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from cli.options import (
    ChromaUrl,
    DataDir,
    DbUrl,
    EmbedModel,
    EmbedUrl,
    PersonaDir,
    PersonaName,
    console,
    err,
    managers_of,
    open_database,
    open_memory,
    owner_unit_of,
)

if TYPE_CHECKING:
    from managers import ManagerFactory

app = typer.Typer(help="The knowledge base: documents the persona can search (txt, md, pdf).")


@app.command("add")
def kb_add(
    files: list[Path] = typer.Argument(..., help="txt, md or pdf files."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
    name: str | None = PersonaName,
) -> None:
    """Chunk and index documents; already-ingested content is skipped. Exit 1 if any file failed. A deployed
    persona's (`--name`) chunks are stored here and embedded by a worker, between its ticks."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if name:
        raise typer.Exit(_add_to_deployed(files, db, name))
    database, index = open_memory(data_dir, db, persona, embed_url, embed_model, chroma_url)
    try:
        failed = _store(managers_of(database, data_dir, db), files)
        err.print("indexing (embedding the new chunks)…")
        err.print(f"indexed {index.sync(progress=True)} item(s)")
    finally:
        index.close()
        database.close()
    raise typer.Exit(1 if failed else 0)


def _store(managers: ManagerFactory, files: list[Path]) -> int:
    """Chunk each file into the knowledge base (SQL; its vectors come after); returns how many failed."""
    from managers.audience import OWNER
    from memory.knowledge import KnowledgeError

    failed = 0
    for number, path in enumerate(files, 1):
        try:
            with managers.unit(OWNER) as house:
                result = house.memory.ingest_file(path)
        except KnowledgeError as exc:
            err.print(f"[red]{escape(str(exc))}[/]")
            failed += 1
            continue
        note = f"skipped: {result.skipped}" if result.skipped else f"document {result.doc_id}, {result.chunks} chunks"
        err.print(f"[{number}/{len(files)}] {escape(result.path)}: {escape(note)}")
    return failed


def _add_to_deployed(files: list[Path], db: str | None, name: str) -> int:
    from cli.fleet import open_deployment
    from memory.fleet import FleetError

    database = open_database("", db, name)
    try:
        failed = _store(managers_of(database, "", db), files)
    finally:
        database.close()
    deployment = open_deployment(db)
    try:
        with err.status(f"indexing on a worker (embedding the new chunks of {name})…"):
            deployment.index(name)
        err.print("indexed")
    except FleetError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        failed += 1
    finally:
        deployment.close()
    return 1 if failed else 0


@app.command("list")
def kb_list(data_dir: str | None = DataDir, db: str | None = DbUrl) -> None:
    """The documents, with their size in chunks and characters."""
    database = open_database(data_dir, db)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            for doc in house.memory.kb_documents():
                console.print(f"{doc.id}\t{doc.chunks} chunks\t{doc.chars} chars\t{escape(doc.path)}")
    finally:
        database.close()


@app.command("search")
def kb_search(
    query: str = typer.Argument(...),
    k: int = typer.Option(5, "--k"),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
) -> None:
    """Search the knowledge base the way the persona does (kb.search)."""
    from memory.retrieval.index import Query

    database, index = open_memory(data_dir, db, persona, embed_url, embed_model, chroma_url)
    try:
        for hit in index.search(Query(text=query, k=k, tiers=["kb"])):
            console.print(
                f"[bold]{hit.score:+.2f}[/] {escape(hit.item.title)} #{escape(hit.item.ref)}: "
                f"{escape(hit.item.text[:300])}"
            )
    finally:
        index.close()
        database.close()


@app.command("remove")
def kb_remove(
    doc_id: int = typer.Argument(...),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
) -> None:
    """Remove a document and its chunks (the human's delete: not restorable)."""
    database, index = open_memory(data_dir, db, persona, embed_url, embed_model, chroma_url)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            doc = house.memory.remove_kb_document(doc_id)
        index.sync(flush=True)
    finally:
        index.close()
        database.close()
    err.print(f"removed document {doc_id} ({escape(doc.path)})")
