"""The vector store: Chroma, administered for the memory index (memory/retrieval/index.py).

Its collection holds one record per live memory, its whole-item vector (record id = item id, metadata: tier, status,
creation time), which finds the dense candidates; the other vectors are in the database (memory/repositories/
vectors.py). The collection's metadata keeps Chroma's position in the catalogue's journal (memory/retrieval/
journal.py moves it with each write). A deployment's persona keeps its collection in its own database on a
`chroma run` server (tenant `anima`); a single persona's, in a directory.
"""

from __future__ import annotations

import functools
import gc
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.retrieval.embeddings import Embedder

if TYPE_CHECKING:
    from chromadb.api import AdminAPI, ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import QueryResult
    from chromadb.config import Settings as ChromaSettings

log = logging.getLogger("memory.retrieval.index")  # the index's lines, under the name they have always had

COLLECTION_PREFIX = "anima-memory"
LAYOUT = "items"  # one record per memory; a collection of the old layout (a record per sentence) is dropped
WRITE_CHUNK = 5000  # records one Chroma call writes or deletes
CHROMA_TENANT = "anima"  # a deployment's tenant on a Chroma server; each persona is a database in it


@functools.cache
def _settle_imports(stage: str) -> None:
    """Once before and once after importing Chroma (a process's largest import, ~0.6 s): what is alive then —
    modules, classes, the caches of the imports — lives as long as the process, so full collections need not scan
    it again. Without it, a restarted persona's first search paid two full collections of the young heap of imports
    (50–80 ms each at 100k memories)."""
    gc.freeze()


def _server(url: str) -> dict[str, Any]:
    from urllib.parse import urlparse

    parts = urlparse(url)
    return {"host": parts.hostname or "localhost", "port": parts.port or 8000, "ssl": parts.scheme == "https"}


def _admin(where: dict[str, Any]) -> AdminAPI:
    import chromadb

    return chromadb.AdminClient(
        chromadb.config.Settings(
            anonymized_telemetry=False,
            chroma_api_impl="chromadb.api.fastapi.FastAPI",
            chroma_server_host=where["host"],
            chroma_server_http_port=where["port"],
            chroma_server_ssl_enabled=where["ssl"],
        )
    )


def chroma_server_client(url: str, database: str | None, settings: ChromaSettings) -> ClientAPI:
    """A client of a `chroma run` server: the default database, or a persona's own (created on first use)."""
    import chromadb
    from chromadb.errors import NotFoundError

    where = _server(url)
    if database is None:
        return chromadb.HttpClient(**where, settings=settings)
    admin = _admin(where)
    try:
        admin.get_database(database, tenant=CHROMA_TENANT)
    except NotFoundError:
        try:
            admin.get_tenant(CHROMA_TENANT)
        except NotFoundError:
            _created_by_anyone(lambda: admin.create_tenant(CHROMA_TENANT))
        _created_by_anyone(lambda: admin.create_database(database, tenant=CHROMA_TENANT))
    return chromadb.HttpClient(**where, settings=settings, tenant=CHROMA_TENANT, database=database)


def _created_by_anyone(create: Callable[[], object]) -> None:
    """Create, unless another worker just did (two may open the same new persona at once)."""
    from chromadb.errors import ChromaError

    try:
        create()
    except ChromaError as exc:
        if "exist" not in str(exc).lower() and "unique" not in str(exc).lower():
            raise


def drop_chroma_database(url: str, database: str) -> None:
    """A removed persona's vectors, for good."""
    from chromadb.errors import NotFoundError

    try:
        _admin(_server(url)).delete_database(database, tenant=CHROMA_TENANT)
    except NotFoundError:
        pass


class VectorStore:
    """One persona's Chroma collection: opened on first use, queried for nearest whole-item vectors, written in
    batches with the journal position they bring it to."""

    def __init__(
        self,
        embedder: Embedder,
        lock: threading.RLock,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        database: str | None = None,
    ):
        self.embedder, self._lock = embedder, lock
        self.path, self.url = path, url
        self.database = database  # a deployment's persona: its own database on the Chroma server
        self._collection: Collection | None = None
        self._records: int | None = None  # vectors in the collection (cached: count() costs a round trip)
        self._loading: threading.Thread | None = None  # reads the nearest-neighbour index in after opening

    @property
    def collection(self) -> Collection:
        with self._lock:
            return self.open()

    def open(self) -> Collection:
        """The collection, opened (and a collection of the old layout dropped) on first use."""
        if self._collection is None:
            _settle_imports("before chromadb")
            import chromadb

            _settle_imports("after chromadb")
            settings = chromadb.config.Settings(anonymized_telemetry=False)
            if self.url:
                client = chroma_server_client(self.url, self.database, settings)
            else:
                path = Path(self.path or "data/chroma").expanduser()
                path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(path), settings=settings)
            name = self.collection_name()
            self._drop_old_layout(client)
            self._collection = client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"journal": 0, "embedder": self.embedder.name},
            )
            # not a daemon: the interpreter's exit waits for it (a bounded read) instead of finalizing under a
            # thread inside Chroma's native code (measured: a Ctrl-C during the first tick then ended in SIGSEGV)
            self._loading = threading.Thread(
                target=self._load_index, args=(self._collection,), name="vector-index-load"
            )
            self._loading.start()
        return self._collection

    @staticmethod
    def _load_index(collection: Collection) -> None:
        """Chroma reads a collection's nearest-neighbour index from disk on its first query (~0.2 s at 100k
        vectors, without holding the GIL): asked for one neighbour of a stored vector right after opening, it reads
        it while the first search does its other work (the corpus statistics, the lexical side)."""
        try:
            first = collection.get(limit=1, include=["embeddings"])
            embeddings = first.get("embeddings")
            if embeddings is not None and len(embeddings):
                probe: np.ndarray = np.asarray(embeddings[0], dtype=np.float32)
                collection.query(query_embeddings=[probe], n_results=1, include=[])
        except Exception:  # only an early read: the first search's own query reads it otherwise
            log.debug("memory index: reading the vector index ahead failed", exc_info=True)

    @property
    def loading(self) -> bool:
        """Whether the nearest-neighbour index is still being read in (a restarted process's first search)."""
        return self._loading is not None and self._loading.is_alive()

    def loaded(self) -> None:
        """Wait for the read-ahead of the nearest-neighbour index (a query or a write does not race it, nor does the
        interpreter's exit: `MemoryIndex.close`)."""
        if (loading := self._loading) is not None:
            loading.join()
            self._loading = None

    def collection_name(self) -> str:
        name = re.sub(r"[^a-zA-Z0-9._-]", "-", f"{COLLECTION_PREFIX}-{self.embedder.name}")[:54].strip("-._")
        return f"{name}-{LAYOUT}"

    @staticmethod
    def _drop_old_layout(client: ClientAPI) -> None:
        """Collections of the layout before `memory_vectors` (a record per sentence, named without the layout):
        their vectors are derived data, made again by the first sync (with progress), so they only take room."""
        from chromadb.errors import NotFoundError

        for collection in client.list_collections():
            name = collection if isinstance(collection, str) else collection.name  # (older Chroma: names)
            if name.startswith(f"{COLLECTION_PREFIX}-") and not name.endswith(f"-{LAYOUT}"):
                try:
                    client.delete_collection(name)
                except (NotFoundError, ValueError):  # another process dropped it first
                    continue
                log.warning(
                    "memory index: vectors now have one record per memory (%s dropped); every memory is "
                    "embedded again once",
                    name,
                )

    def record_count(self) -> int:
        if self._records is None:
            self._records = self.collection.count()
        return self._records

    def position(self) -> int:
        """Chroma's position in the catalogue's journal: every change up to it is written."""
        return int((self.collection.metadata or {}).get("journal", 0))

    def nearest(self, vectors: Sequence[np.ndarray], n: int, where: dict[str, Any] | None = None) -> QueryResult:
        """The `n` records nearest each vector (record ids and cosine distances); fewer when it holds fewer."""
        collection = self.collection
        self.loaded()
        return collection.query(query_embeddings=list(vectors), n_results=n, where=where, include=["distances"])

    def write(
        self,
        upserts: list[tuple[str, np.ndarray, dict[str, Any]]],
        updates: list[tuple[str, dict[str, Any]]],
        deletes: list[str],
        position: int,
    ) -> None:
        """Delete, upsert (vector and metadata), update (metadata only), then move the journal position."""
        collection = self.collection
        self.loaded()
        for start in range(0, len(deletes), WRITE_CHUNK):
            collection.delete(ids=deletes[start : start + WRITE_CHUNK])
        for start in range(0, len(upserts), WRITE_CHUNK):
            chunk = upserts[start : start + WRITE_CHUNK]
            collection.upsert(
                ids=[r for r, _, _ in chunk],
                embeddings=np.stack([v for _, v, _ in chunk]),
                metadatas=[m for _, _, m in chunk],
            )
        for start in range(0, len(updates), WRITE_CHUNK):
            part = updates[start : start + WRITE_CHUNK]
            collection.update(ids=[r for r, _ in part], metadatas=[m for _, m in part])
        collection.modify(metadata={"journal": position, "embedder": self.embedder.name})
        self._records = None
