"""The full-text index of the retrieval catalogue, in the database's own engine, written in the catalogue's transaction.

- SQLite: an FTS5 table `memory_fts(own, context)` whose rowid is the item id, and `memory_fts_terms` (fts5vocab:
  how many documents hold each term).
- PostgreSQL: `memory_fts(item_id, own, context, document)` with `document` a tsvector (own words at weight A, the
  neighbours' at B) under a GIN index.

Documents are stored already tokenised by memory/text.py (lower-cased, stop words out, Snowball-stemmed, CJK
bigrams), so both engines match exactly the tokens BM25 scores (SQLite's `ascii` tokenizer and PostgreSQL's
`simple` configuration only split on the spaces). The engine finds the candidates of a query's selective terms and
counts documents per term; memory/retrieval/lexical.py scores BM25 from the stored tokens, so SQLite and
PostgreSQL rank alike.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import lru_cache

from sqlalchemy import Connection, TextClause, text
from sqlalchemy.orm import Session

from memory.repositories.base import Repo
from memory.text import lexical_document

log = logging.getLogger(__name__)

TABLE = "memory_fts"


@lru_cache(maxsize=512)
def _sql(statement: str) -> TextClause:
    """A fixed-shape statement's `text()`, built (its bound names parsed) once: the tick runs several."""
    return text(statement)


BACKFILL_PAGE = 2000


def create_lexical_index(conn: Connection) -> None:
    """Create the full-text table (and its term counts) if missing; the schema's DDL for both engines."""
    if conn.dialect.name == "sqlite":
        conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(own, context, tokenize='ascii')"))
        conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE}_terms USING fts5vocab({TABLE}, 'row')"))
        return
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (item_id INTEGER PRIMARY KEY, own TEXT NOT NULL, "
            "context TEXT NOT NULL, document TSVECTOR NOT NULL)"
        )
    )
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_document ON {TABLE} USING GIN (document)"))


def backfill_lexical_index(conn: Connection) -> int:
    """Index every catalogue item that is not deleted (an upgraded database, a spawned child's copied memory);
    progress goes to the log."""
    total = conn.execute(text("SELECT count(*) FROM memory_items WHERE status != 'deleted'")).scalar() or 0
    if not total:
        return 0
    say = log.warning if total > BACKFILL_PAGE else log.info  # a long upgrade shows its progress in the terminal
    say("building the full-text index of %d memories", total)
    started, done, after = time.monotonic(), 0, 0
    lexical = LexicalRepo(None, conn)
    while True:
        rows = conn.execute(
            text(
                "SELECT id, created_at, author, title, text, context_before, context_after "
                "FROM memory_items WHERE status != 'deleted' AND id > :after ORDER BY id LIMIT :n"
            ),
            {"after": after, "n": BACKFILL_PAGE},
        ).all()
        if not rows:
            break
        lexical.put_many(
            (
                row.id,
                *lexical_document(
                    created_at=_as_datetime(row.created_at),
                    author=row.author or "",
                    title=row.title or "",
                    text=row.text or "",
                    context_before=row.context_before or "",
                    context_after=row.context_after or "",
                ),
            )
            for row in rows
        )
        done, after = done + len(rows), rows[-1].id
        say("full-text index: %d/%d memories (%.0f/s)", done, total, done / max(1e-6, time.monotonic() - started))
    return done


def _as_datetime(value: datetime | str) -> datetime:
    """SQLite hands a raw column back as text."""
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


class LexicalRepo(Repo):
    """The full-text documents of catalogue items. Built on a session (`Repos.lexical`) or, during a migration, on a
    bare connection."""

    def __init__(self, session: Session | None, connection: Connection | None = None):
        if session is not None:  # (a migration's has only the connection)
            super().__init__(session)
        self._connection = connection

    @property
    def _conn(self) -> Connection:
        return self._connection if self._connection is not None else self.session.connection()

    @property
    def _sqlite(self) -> bool:
        return self._conn.dialect.name == "sqlite"

    # ---- writes ------------------------------------------------------------------------------------------

    def put(self, item_id: int, own: str, context: str) -> None:
        self.put_many([(item_id, own, context)])

    def put_many(self, documents: Iterable[tuple[int, str, str]]) -> None:
        rows = [{"id": int(i), "own": own, "context": context} for i, own, context in documents]
        if not rows:
            return
        if self._sqlite:  # an FTS5 table has no upsert: replace the row
            self._conn.execute(_sql(f"DELETE FROM {TABLE} WHERE rowid = :id"), rows)
            self._conn.execute(_sql(f"INSERT INTO {TABLE}(rowid, own, context) VALUES (:id, :own, :context)"), rows)
            return
        self._conn.execute(
            _sql(
                f"INSERT INTO {TABLE} (item_id, own, context, document) VALUES (:id, :own, :context, "
                "setweight(to_tsvector('simple', :own), 'A') || setweight(to_tsvector('simple', :context), 'B')) "
                "ON CONFLICT (item_id) DO UPDATE SET own = EXCLUDED.own, context = EXCLUDED.context, "
                "document = EXCLUDED.document"
            ),
            rows,
        )

    def remove(self, item_id: int) -> None:
        key = "rowid" if self._sqlite else "item_id"
        self._conn.execute(_sql(f"DELETE FROM {TABLE} WHERE {key} = :id"), {"id": int(item_id)})

    def optimize(self) -> None:
        """SQLite: merge the index's segments into one, so no term of a replaced or removed document lingers in an
        old segment (FTS5 otherwise keeps it, marked deleted, until a merge); PostgreSQL updates its rows in place."""
        if self._sqlite:
            self._conn.execute(text(f"INSERT INTO {TABLE}({TABLE}) VALUES ('optimize')"))

    # ---- reads -------------------------------------------------------------------------------------------

    def count(self) -> int:
        # FTS5 keeps one row per document in its docsize table, a plain b-tree SQLite counts from its pages
        # (0.7 ms at 100k documents, against 30 ms for counting the virtual table's rows)
        table = f"{TABLE}_docsize" if self._sqlite else TABLE
        return int(self._conn.execute(_sql(f"SELECT count(*) FROM {table}")).scalar() or 0)

    def documents(self, item_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """item id -> (own tokens, context tokens), space-separated."""
        ids = sorted({int(i) for i in item_ids})
        found: dict[int, tuple[str, str]] = {}
        key = "rowid" if self._sqlite else "item_id"
        for chunk in _chunks(ids, 500):
            marks = ", ".join(str(i) for i in chunk)  # integers only: safe to inline, and one statement per page
            for row in self._conn.execute(text(f"SELECT {key}, own, context FROM {TABLE} WHERE {key} IN ({marks})")):
                found[int(row[0])] = (row[1] or "", row[2] or "")
        return found

    def document_frequencies(self, terms: Iterable[str], cap: int) -> dict[str, int]:
        """How many documents hold each term: exact on SQLite (FTS5 keeps the counts); on PostgreSQL counted up to
        `cap` (a count at the cap means "at least"), since counting a frequent term's matches costs a scan of them."""
        terms = sorted(set(terms))
        if not terms:
            return {}
        if self._sqlite:
            marks = ", ".join(f":t{n}" for n in range(len(terms)))
            got: dict[str, int] = {
                term: doc
                for term, doc in self._conn.execute(
                    _sql(f"SELECT term, doc FROM {TABLE}_terms WHERE term IN ({marks})"),
                    {f"t{n}": t for n, t in enumerate(terms)},
                )
            }
            return {t: int(got.get(t, 0)) for t in terms}
        counted = self._conn.execute(
            _sql(  # every term in one statement (one round trip), each count capped
                f"SELECT t.n, (SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE document @@ to_tsquery('simple', t.q) "
                "LIMIT :cap) m) FROM unnest(CAST(:qs AS text[])) WITH ORDINALITY AS t(q, n)"
            ),
            {"qs": [_tsquery_term(term) for term in terms], "cap": cap},
        )
        by_position = {int(n): int(count or 0) for n, count in counted}
        return {term: by_position.get(n, 0) for n, term in enumerate(terms, 1)}

    def candidates(self, terms: list[str], limit: int) -> list[int]:
        """Item ids of the documents that hold any of `terms`, best first by the engine's own ranking (FTS5's bm25,
        PostgreSQL's ts_rank), at most `limit`."""
        terms = [t for t in dict.fromkeys(terms) if t]
        if not terms:
            return []
        if self._sqlite:
            query = " OR ".join(f'"{t}"' for t in terms)
            rows = self._conn.execute(
                _sql(f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH :q ORDER BY bm25({TABLE}, 1.0, 0.5) LIMIT :n"),
                {"q": query, "n": limit},
            )
        else:
            query = " | ".join(_tsquery_term(t) for t in terms)
            rows = self._conn.execute(
                _sql(
                    f"SELECT item_id FROM {TABLE}, to_tsquery('simple', :q) query WHERE document @@ query "
                    "ORDER BY ts_rank('{0.1, 0.2, 0.5, 1.0}', document, query, 1) DESC LIMIT :n"
                ),
                {"q": query, "n": limit},
            )
        return [int(r[0]) for r in rows]

    def sample(self, size: int) -> dict[int, tuple[str, str]]:
        """A uniform random sample of the documents (the corpus statistics BM25 normalisation needs): ids drawn
        uniformly from the catalogue's id range and kept when they are live, so the cost follows the sample, not the
        corpus (`ORDER BY random()` sorts every row: 80 ms of a restarted persona's first search at 100k)."""
        low, high = self._conn.execute(_sql("SELECT min(id), max(id) FROM memory_items")).one()
        if low is None:
            return {}
        span, size = high - low + 1, int(size)
        if span <= 4 * size:  # a small catalogue: draw from all of it
            ids = [
                int(r[0])
                for r in self._conn.execute(
                    _sql("SELECT id FROM memory_items WHERE status != 'deleted' ORDER BY random() LIMIT :n"),
                    {"n": size},
                )
            ]
            return self.documents(ids)
        rng, drawn, live = random.Random(), set[int](), list[int]()
        for _ in range(4):  # more draws only when many ids are gone (deleted rows, or purged ones)
            fresh = [i for i in rng.sample(range(low, high + 1), min(span, 2 * size)) if i not in drawn][
                : span - len(drawn)
            ]
            drawn.update(fresh)
            for chunk in _chunks(sorted(fresh), 500):
                marks = ", ".join(str(i) for i in chunk)  # integers only: safe to inline
                live += [
                    int(r[0])
                    for r in self._conn.execute(
                        text(f"SELECT id FROM memory_items WHERE id IN ({marks}) AND status != 'deleted'")
                    )
                ]
            if len(live) >= size:
                break
        rng.shuffle(live)
        return self.documents(live[:size])


def _tsquery_term(term: str) -> str:
    """A token as a tsquery operand: quoted, so a token PostgreSQL's parser reads differently stays one lexeme."""
    return "'" + term.replace("'", "''").replace("\\", "\\\\") + "'"


def _chunks(values: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
