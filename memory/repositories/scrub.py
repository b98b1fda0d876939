"""Rewriting text wherever this database keeps it (anonymisation, managers/anonymise.py): every table of the schema
is either swept — its free-text and JSON columns passed through a change — or named in `KEPT` with the reason it is
not (`tests/unit/test_anonymise_everywhere.py` fails when a new table is neither, so a new place text lives in
cannot be missed).

What is swept: the `Text` and `JSON` columns of every table not kept, and the `String` columns whose name says they
hold words people wrote or said (`WORDS`: a title, an author, a summary…), never keys, ids, states or kinds. The
memory tiers' own rows were already rewritten through their tiers (with their history): the sweep finds nothing left
there. The catalogue's rows (`memory_items`) that change are returned, for their full-text documents and vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, String, Table, Text, and_, delete, select, tuple_, update

from memory.models import Base
from memory.repositories.base import Repo
from memory.repositories.config import PERSONA_EDITS_KEY, SESSION_EXPORT_PREFIX

PAGE = 1000
WORDS = frozenset({"title", "author", "name", "summary", "topic", "sender_name", "snippet"})

# table -> why its text is not rewritten
KEPT: dict[str, str] = {
    "schema_version": "the schema's number",
    "memory_history": "rewritten by its own repository (HistoryRepo.rewrite), with the tiers",
    "memory_journal": "item ids and operations only",
    "memory_vectors": "vectors only (the rewritten items are embedded again)",
    "llm_registry": "the models' settings: a model's name is no one's",
    "llm_calls": "counts and a model's errors",
    "people": "the directory of the persona's humans: who they are is kept (delete the person to forget them)",
    "person_identities": "channel addresses: where the persona reaches its humans",
    "contact_requests": "the directory's waiting requests (refusing one deletes what it held)",
    "peers": "the directory of agents: names are addresses",
    "channel_cursors": "a channel's position",
    "sealed_secrets": "sealed keys: no text",
    "mesh_blocklist": "DIDs",
    "mesh_revocations": "DIDs",
    "mesh_subscriptions": "topic names",
    "mesh_evaluations": "scores of DIDs",
    "feeds": "subscriptions: URLs and their titles",
    "threads": "a thread's ids and settings (its chronicle is swept: PARTLY)",
    "kb_documents": "where a document came from: its path and checksum (its title is swept: PARTLY; its chunks are "
    "catalogue rows)",
    "process_runs": "a job's work directory (its spec and output are swept: PARTLY)",
}
# kept tables whose free text is still swept, column by column
PARTLY: dict[str, tuple[str, ...]] = {
    "threads": ("chronicle", "chronicle_prompt", "error"),
    "kb_documents": ("title",),
    "process_runs": ("output", "spec"),
}
# the config keys that hold what was said (the rest are settings)
CONFIG_KEYS = (SESSION_EXPORT_PREFIX, PERSONA_EDITS_KEY)
# signed by their author: a changed body would no longer verify, so one that holds a replaced name is forgotten
SIGNED = {"mesh_containers": "body"}


@dataclass
class Swept:
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows rewritten
    forgotten: dict[str, int] = field(default_factory=dict)  # table -> rows deleted (signed ones)
    items: list[int] = field(default_factory=list)  # memory_items rewritten

    @property
    def total(self) -> int:
        return sum(self.rows.values()) + sum(self.forgotten.values())


def tables() -> list[Table]:
    return list(Base.metadata.sorted_tables)


def text_columns(table: Table) -> list[str]:
    """The columns of `table` the sweep rewrites."""
    if table.name in KEPT:
        return list(PARTLY.get(table.name, ()))
    found = []
    for column in table.columns:
        if column.primary_key:
            continue
        kind = column.type
        if isinstance(kind, (Text, JSON)) or (isinstance(kind, String) and column.name in WORDS):
            found.append(column.name)
    return found


class ScrubRepo(Repo):
    def _pages(self, table: Table, columns: list[str]) -> Iterator[list[Any]]:
        keys = list(table.primary_key.columns)
        query = select(*keys, *(table.c[c] for c in columns))
        if table.name == "config":
            query = query.where(table.c.key.startswith(CONFIG_KEYS[0]) | (table.c.key == CONFIG_KEYS[1]))
        after: tuple[Any, ...] | None = None
        while True:
            page = query
            if after is not None:
                page = page.where(tuple_(*keys) > tuple_(*after)) if len(keys) > 1 else page.where(keys[0] > after[0])
            rows = list(self.core(page.order_by(*keys).limit(PAGE)).all())
            if not rows:
                return
            yield rows
            after = tuple(rows[-1][: len(keys)])

    def texts(self, table_name: str, columns: list[str]) -> Iterator[str]:
        """The values of these columns of a table, page by page, as text (what anonymisation looks for names in)."""
        table = Base.metadata.tables[table_name]
        for rows in self._pages(table, columns):
            for row in rows:
                yield "\n".join(str(v) for v in row[len(table.primary_key.columns) :] if v)

    def sweep(self, change: Callable[[Any], Any]) -> Swept:
        """Every swept column of every table through `change`; signed rows holding a change deleted."""
        self.session.flush()
        swept = Swept()
        for table in tables():
            columns = text_columns(table)
            if table.name in SIGNED:
                columns = [SIGNED[table.name]]
            if not columns:
                continue
            keys = list(table.primary_key.columns)
            for rows in self._pages(table, columns):
                for row in rows:
                    values = row[len(keys) :]
                    new = [change(v) for v in values]
                    if new == list(values):
                        continue
                    where = and_(*(k == row[i] for i, k in enumerate(keys)))
                    if table.name in SIGNED:
                        self.core(delete(table).where(where))
                        swept.forgotten[table.name] = swept.forgotten.get(table.name, 0) + 1
                        continue
                    self.core(
                        update(table).where(where).values({c: n for c, n, v in zip(columns, new, values) if n != v})
                    )
                    swept.rows[table.name] = swept.rows.get(table.name, 0) + 1
                    if table.name == "memory_items":
                        swept.items.append(int(row[0]))
        self.session.expire_all()  # what the unit held of these rows is read again
        return swept


__all__ = ["KEPT", "PARTLY", "SIGNED", "ScrubRepo", "Swept", "text_columns", "tables"]
