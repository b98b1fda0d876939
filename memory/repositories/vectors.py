"""The memories' vectors (`memory_vectors`): every vector of a memory, read by id when its candidates are re-scored
and paged through when a restarted process copies them into memory. Chroma holds only the whole-text vector, for
the nearest-neighbour search (memory/retrieval/index.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Delete, Insert, Row, Select, bindparam, delete, select

from memory.models import MemoryVector
from memory.repositories.base import Repo, prepared, table_of

if TYPE_CHECKING:  # numpy is imported where vectors are packed or unpacked: opening the database needs none
    import numpy as np

DTYPE = "float16"  # half the bytes of float32; similarities agree to ~1e-3


class StoredVectors(NamedTuple):
    texts_key: str
    vectors: np.ndarray  # (parts, dim) float16, row 0 the whole text


def _decoded(row: Row[int, str, int, bytes]) -> StoredVectors:
    import numpy as np

    matrix = np.frombuffer(row.vectors, dtype=DTYPE).reshape(row.parts, -1)
    return StoredVectors(row.texts_key, matrix)


@prepared
def _delete_of() -> Delete:
    table = table_of(MemoryVector)
    return delete(table).where(table.c.item_id.in_(bindparam("ids", expanding=True)))


@prepared
def _upsert_rows(dialect: str) -> Insert:
    """INSERT … ON CONFLICT (item_id) DO UPDATE: an item's row replaced in one statement (SQLite and PostgreSQL)."""
    from sqlalchemy.dialects import postgresql, sqlite

    columns = ("embedder", "texts_key", "parts", "vectors")
    if dialect == "postgresql":
        pg = postgresql.insert(table_of(MemoryVector))
        return pg.on_conflict_do_update(index_elements=["item_id"], set_={name: pg.excluded[name] for name in columns})
    lite = sqlite.insert(table_of(MemoryVector))
    return lite.on_conflict_do_update(index_elements=["item_id"], set_={name: lite.excluded[name] for name in columns})


@prepared
def _vectors_of() -> Select[int, str, int, bytes]:
    c = table_of(MemoryVector).c
    return select(c.item_id, c.texts_key, c.parts, c.vectors).where(
        c.item_id.in_(bindparam("ids", expanding=True)), c.embedder == bindparam("embedder")
    )


class VectorRepo(Repo):
    """Core statements throughout: the table is read and written by item id, never as objects."""

    def put(self, embedder: str, rows: Iterable[tuple[int, str, np.ndarray]]) -> int:
        """Store (item id, texts key, vectors) rows, replacing what the items had."""
        import numpy as np

        values = list(
            {
                item_id: {
                    "item_id": item_id,
                    "embedder": embedder,
                    "texts_key": key,
                    "parts": len(vectors),
                    "vectors": np.ascontiguousarray(vectors, dtype=DTYPE).tobytes(),
                }
                for item_id, key, vectors in rows
            }.values()
        )  # an item once (PostgreSQL refuses a row twice)
        if not values:
            return 0
        self.core(_upsert_rows(self.session.get_bind().dialect.name), values)
        return len(values)

    def get(self, embedder: str, item_ids: Iterable[int]) -> dict[int, StoredVectors]:
        ids = sorted({int(i) for i in item_ids})
        found: dict[int, StoredVectors] = {}
        for start in range(0, len(ids), 500):  # Core rows: a query reads a few hundred
            found.update(
                {
                    row.item_id: _decoded(row)
                    for row in self.core(_vectors_of(), {"ids": ids[start : start + 500], "embedder": embedder})
                }
            )
        return found

    def page(self, embedder: str, after_id: int = 0, limit: int = 5000) -> dict[int, StoredVectors]:
        """The next `limit` items' vectors after `after_id`, by id."""
        q = (
            select(MemoryVector.item_id, MemoryVector.texts_key, MemoryVector.parts, MemoryVector.vectors)
            .where(MemoryVector.item_id > after_id, MemoryVector.embedder == embedder)
            .order_by(MemoryVector.item_id)
            .limit(limit)
        )
        return {row.item_id: _decoded(row) for row in self.session.connection().execute(q)}

    def remove(self, item_ids: Iterable[int]) -> None:
        ids = list(item_ids)
        for start in range(0, len(ids), 500):
            self.core(_delete_of(), {"ids": ids[start : start + 500]})
