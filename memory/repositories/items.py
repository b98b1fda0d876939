"""The retrieval catalogue (`memory_items`) and its journal.

Every retrievable thing of any tier has one item; every change to an item appends to `memory_journal` in the
same transaction, so the vector index (memory/retrieval/index.py) catches up after a crash instead of drifting
out of sync. The full-text index (memory/repositories/lexical.py) is written in that same transaction. Besides
the index's reads, this module holds the catalogue queries of the memory manager and of the episodic summaries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from types import SimpleNamespace
from typing import Any, TypeAlias, Unpack

from sqlalchemy import ColumnElement, Insert, Row, Select, Update, bindparam, func, insert, or_, select, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from memory.clock import utcnow
from memory.models import MemoryItem, MemoryJournal
from memory.repositories.base import Repo, one_of, prepared, table_of
from memory.repositories.lexical import LexicalRepo
from memory.repositories.vectors import VectorRepo
from memory.text import lexical_document

RankingRow: TypeAlias = "Row[Unpack[tuple[Any, ...]]]"  # RANKING_COLUMNS (+ tags and emotions with `focus`)
ItemLike: TypeAlias = "MemoryItem | Row[Unpack[tuple[Any, ...]]]"  # an item, or a plain row of all its columns

# The persona's own conversation turns have refs `msg:<message id>`; the human's are `note:<note id>`.
OWN_TURN_PREFIX = "msg:"


def _not_the_humans_words() -> ColumnElement[bool]:
    """Of conversation items only the persona's own turns: what the human said is never pruned."""
    return or_(MemoryItem.tier != "message", MemoryItem.ref.like(f"{OWN_TURN_PREFIX}%"))


@prepared
def _by_ref() -> Select[MemoryItem]:
    return select(MemoryItem).where(MemoryItem.tier == bindparam("tier"), MemoryItem.ref == bindparam("ref"))


@prepared
def _id_by_ref() -> Select[tuple[int]]:
    c = table_of(MemoryItem).c
    return select(c.id).where(c.tier == bindparam("tier"), c.ref == bindparam("ref"))


@prepared
def _last_of() -> Select[MemoryItem]:
    return (
        select(MemoryItem)
        .where(MemoryItem.episode == bindparam("episode"), MemoryItem.seq.is_not(None))
        .order_by(MemoryItem.seq.desc())
        .limit(1)
    )


@prepared
def _insert_item() -> Insert:
    return insert(table_of(MemoryItem))


@prepared
def _update_context_after() -> Update:
    c = table_of(MemoryItem).c
    return (
        update(table_of(MemoryItem))
        .where(c.id == bindparam("item_id"))
        .values(context_after=bindparam("rendered"), updated_at=bindparam("now"))
    )


NEIGHBOUR_COLUMNS = (
    "id",
    "seq",
    "created_at",
    "updated_at",
    "author",
    "title",
    "text",
    "context_before",
    "context_after",
    "event_at",
    "meta",
)  # what a new item takes from the one before it, and its full-text document


@prepared
def _last_line() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_last_of` as one plain row of NEIGHBOUR_COLUMNS."""
    c = table_of(MemoryItem).c
    return (
        select(*(c[name] for name in NEIGHBOUR_COLUMNS))
        .where(c.episode == bindparam("episode"), c.seq.is_not(None))
        .order_by(c.seq.desc())
        .limit(1)
    )


@prepared
def _line_at() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_by_episode_seq` as one plain row of NEIGHBOUR_COLUMNS."""
    c = table_of(MemoryItem).c
    return (
        select(*(c[name] for name in NEIGHBOUR_COLUMNS))
        .where(c.episode == bindparam("episode"), c.seq == bindparam("seq"))
        .limit(1)
    )


@prepared
def _by_episode_seq() -> Select[MemoryItem]:
    return select(MemoryItem).where(MemoryItem.episode == bindparam("episode"), MemoryItem.seq == bindparam("seq"))


@prepared
def _by_ids() -> Select[MemoryItem]:
    return select(MemoryItem).where(MemoryItem.id.in_(bindparam("ids", expanding=True)))


@prepared
def _lines_by_ids() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_by_ids` as plain rows (every column)."""
    c = table_of(MemoryItem).c
    return select(table_of(MemoryItem)).where(c.id.in_(bindparam("ids", expanding=True)))


@prepared
def _refs(column: str) -> Select[str, Any]:
    """(ref, `column`) of the items of a tier with these refs."""
    return select(MemoryItem.ref, getattr(MemoryItem, column)).where(
        MemoryItem.tier == bindparam("tier"), MemoryItem.ref.in_(bindparam("refs", expanding=True))
    )


@prepared
def _journal_rows() -> Insert:
    return insert(table_of(MemoryJournal))


@prepared
def _touch() -> Update:
    c = table_of(MemoryItem).c
    return (
        update(table_of(MemoryItem))
        .where(c.id.in_(bindparam("ids", expanding=True)))
        .values(access_count=c.access_count + 1, last_accessed_at=bindparam("now"))
    )


@prepared
def _ranking_rows(focus: bool) -> Select[Unpack[tuple[Any, ...]]]:
    columns = [*MemoryItemRepo.RANKING_COLUMNS, *((MemoryItem.tags, MemoryItem.emotions) if focus else ())]
    return select(*columns).where(MemoryItem.id.in_(bindparam("ids", expanding=True)))


@prepared
def _journal_head() -> Select[int | None]:
    return select(func.max(table_of(MemoryJournal).c.id))  # Core, as the two below: one number or ids back


@prepared
def _changed_since() -> Select[int]:
    c = table_of(MemoryJournal).c
    return select(c.item_id).where(c.id > bindparam("after"), c.id <= bindparam("upto")).distinct()


@prepared
def _any_active(tiers: tuple[str, ...]) -> Select[int]:
    c = table_of(MemoryItem).c
    return select(c.id).where(c.status == "active", one_of(c.tier, tiers)).limit(1)


SAMPLE_COLUMNS = ("id", "tier", "ref", "thread_id", "author", "title", "text", "meta", "created_at")


@prepared
def _sample_lines(tiers: tuple[str, ...], exclude_thread: bool) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `sample`'s query, as plain rows of SAMPLE_COLUMNS."""
    c = table_of(MemoryItem).c
    q = select(*(c[name] for name in SAMPLE_COLUMNS)).where(one_of(c.tier, tiers), c.status == "active")
    if exclude_thread:
        q = q.where((c.thread_id.is_(None)) | (c.thread_id != bindparam("exclude_thread")))
    return q.order_by(func.random()).limit(bindparam("limit"))


class MemoryItemRepo(Repo):
    def _journal(self, item_id: int, op: str, *more: int) -> None:
        """Journal a change to these items, in one statement (the rows are never read back as objects)."""
        self.core(_journal_rows(), [{"item_id": i, "op": op} for i in (item_id, *more)])

    @property
    def lexical(self) -> LexicalRepo:
        return LexicalRepo(self.session)

    @property
    def vectors(self) -> VectorRepo:
        return VectorRepo(self.session)

    def _index_texts(self, items: Iterable[Any]) -> None:
        """Write the items' full-text documents (their words and their neighbours'), in one statement per kind;
        `items`: MemoryItems, or rows of their columns."""
        self.lexical.put_many(
            [
                (
                    item.id,
                    *lexical_document(
                        created_at=item.created_at,
                        author=item.author or "",
                        title=item.title or "",
                        text=item.text or "",
                        context_before=item.context_before or "",
                        context_after=item.context_after or "",
                        event_at=item.event_at,
                        expansion=str((item.meta or {}).get("expansion") or ""),
                    ),
                )
                for item in items
            ]
        )

    def get(self, item_id: int) -> MemoryItem | None:
        return self.session.get(MemoryItem, item_id)

    def find(self, tier: str, ref: str | int) -> MemoryItem | None:
        return self.session.scalars(_by_ref(), {"tier": tier, "ref": str(ref)}).first()

    def put(
        self,
        tier: str,
        ref: str | int,
        text: str,
        *,
        author: str = "",
        episode: str | None = None,
        seq: int | None = None,
        title: str = "",
        thread_id: str | None = None,
        tags: Iterable[str] = (),
        emotions: Iterable[str] = (),
        importance: float = 0.5,
        emotion_score: float = 0.0,
        novelty: float | None = None,
        pinned: bool = False,
        created_at: datetime | None = None,
        context_before: str | None = None,
        meta: dict[str, Any] | None = None,
        event_at: datetime | None = None,
    ) -> MemoryItem:
        """Insert or update the item standing for `tier`/`ref`. In an episode, the item learns the text
        before it, and the item before it learns this one (both are re-indexed). `event_at`: when what it tells
        happened, when its source says (memory/event_time.py; else the follow-up reads it from the text)."""
        # Core first: the tick writes a new item every tick, which an ORM query would look for at a higher cost
        found_id = self.core(_id_by_ref(), {"tier": tier, "ref": str(ref)}).scalar()
        found = self.session.get(MemoryItem, found_id) if found_id is not None else None
        if (
            found is not None
            and episode is not None
            and seq is None
            and found.seq is not None
            and found.episode == episode
        ):
            seq = found.seq
        previous: Row[Unpack[tuple[Any, ...]]] | None = None
        if episode is not None and seq is None:  # placed after the episode's last item: that item is the one before
            previous = self.core(_last_line(), {"episode": episode}).first()
            seq = 0 if previous is None else previous.seq + 1
        elif episode is not None and context_before is None and seq is not None:
            previous = self.core(_line_at(), {"episode": episode, "seq": seq - 1}).first()
        rendered = f"{author}: {text}" if author else text
        changed: list[Any] = []  # the items before it whose context changed, as rows
        now = utcnow()
        if previous is not None and episode is not None and context_before is None:
            context_before = f"{previous.author}: {previous.text}" if previous.author else previous.text
            if previous.context_after != rendered:
                changed.append(self._set_context_after(previous, rendered, now))
        fields: dict[str, Any] = {
            "text": text,
            "author": author,
            "episode": episode,
            "seq": seq,
            "title": title,
            "thread_id": thread_id,
            "tags": list(tags),
            "emotions": list(emotions),
            "importance": importance,
            "emotion_score": emotion_score,
            "novelty": novelty,
            "pinned": pinned,
            "context_before": context_before or "",
            "updated_at": now,
        }
        if created_at is not None:
            fields["created_at"] = created_at
        if meta is not None:
            fields["meta"] = dict(meta)
        if event_at is not None:
            fields["event_at"] = event_at
            kept: dict[str, Any] = fields["meta"] if meta is not None else (found.meta if found else None) or {}
            fields["meta"] = {**kept, "event": {"from": "source"}}
        if found is None:
            item = self._insert(tier, str(ref), fields)
        else:
            item = found
            for name, value in fields.items():
                setattr(item, name, value)
            if item.status == "deleted":
                item.status = "active"
            self.session.flush()
        self._journal(item.id, "upsert", *(row.id for row in changed))
        self._index_texts((*changed, item))  # the full-text documents, in this transaction
        return item

    def _insert(self, tier: str, ref: str, fields: dict[str, Any]) -> MemoryItem:
        """A new item in one Core INSERT (the tick writes one every tick; the catalogue's creates are no memory
        history), held by the session as the ORM would hold it after its own INSERT: every column as written (the
        columns' defaults as the INSERT made them), so nothing is read back."""
        return self._inserted(MemoryItem, _insert_item(), {**fields, "tier": tier, "ref": ref})

    def _set_context_after(self, previous: Row[Unpack[tuple[Any, ...]]], rendered: str, now: datetime) -> Any:
        """The item before a new one learns its text (one Core UPDATE; a row this unit holds sees it, as after the
        ORM's own UPDATE); the item's columns as they now are, for its full-text document."""
        self.core(_update_context_after(), {"item_id": previous.id, "rendered": rendered, "now": now})
        held = self.session.identity_map.get(identity_key(MemoryItem, previous.id))
        if held is not None:
            set_committed_value(held, "context_after", rendered)
            set_committed_value(held, "updated_at", now)
        return SimpleNamespace(**{**previous._mapping, "context_after": rendered, "updated_at": now})

    def after(self, item_id: int, limit: int) -> list[MemoryItem]:
        """Live items written after `item_id`, by id (what the memory index's follow-up has still to look at)."""
        return list(
            self.session.scalars(
                select(MemoryItem)
                .where(MemoryItem.id > item_id, MemoryItem.status != "deleted")
                .order_by(MemoryItem.id)
                .limit(limit)
            ).all()
        )

    def set_event_time(self, item: MemoryItem, at: datetime, phrase: str, precision: str) -> None:
        """The event time the item's text names (memory/event_time.py), journalled and in its full-text document."""
        item.event_at = at
        item.meta = {**(item.meta or {}), "event": {"from": "text", "phrase": phrase, "precision": precision}}
        self._changed(item)

    def set_expansion(self, item: MemoryItem, expansion: str) -> None:
        """The item's index-time expansion (memory/expansion.py: key phrases, facts, dates), searchable by its
        words (the full-text document) and its meaning (one more vector, at the next sync)."""
        item.meta = {**(item.meta or {}), "expansion": expansion}
        self._changed(item)

    def _changed(self, item: MemoryItem) -> None:
        item.updated_at = utcnow()
        self.session.flush()
        self._journal(item.id, "upsert")
        self._index_texts((item,))

    def reindex(self, item_ids: Iterable[int]) -> int:
        """Items whose text was rewritten in place (anonymisation): their full-text documents written again (a
        deleted one has none) and a journal upsert each, so the vector store embeds them again; how many."""
        ids, done = sorted(set(item_ids)), 0
        for start in range(0, len(ids), 500):
            items = [i for i in self.many(ids[start : start + 500]).values() if i.status != "deleted"]
            if items:
                self._journal(items[0].id, "upsert", *(i.id for i in items[1:]))
                self._index_texts(items)
            done += len(items)
        return done

    def forget(self, refs: Iterable[str]) -> int:
        """The items standing for these refs (any tier: `note:7`) forgotten for good: their text emptied, deleted
        from the full-text index and (journalled) from the vectors, and their neighbours' copies of it (the context
        before or after them) emptied and indexed again. How many."""
        wanted = sorted({str(r) for r in refs})
        if not wanted:
            return 0
        items = list(self.session.scalars(select(MemoryItem).where(MemoryItem.ref.in_(wanted))).all())
        neighbours: list[MemoryItem] = []
        for item in items:
            if item.episode is not None and item.seq is not None:
                before, after = self.at(item.episode, item.seq - 1), self.at(item.episode, item.seq + 1)
                if before is not None:
                    before.context_after = ""
                    neighbours.append(before)
                if after is not None:
                    after.context_before = ""
                    neighbours.append(after)
            item.text, item.title, item.context_before, item.context_after = "", "", "", ""
            item.meta, item.tags, item.status, item.updated_at = {}, [], "deleted", utcnow()
        self.session.flush()
        for item in items:
            self._journal(item.id, "delete")
            self.lexical.remove(item.id)
        kept = [n for n in neighbours if n.status != "deleted"]
        if kept:
            self._journal(kept[0].id, "upsert", *(n.id for n in kept[1:]))
            self._index_texts(kept)
        return len(items)

    def last_of(self, episode: str) -> MemoryItem | None:
        """The episode's item with the highest position."""
        return self.session.scalars(_last_of(), {"episode": episode}).first()

    def at(self, episode: str, seq: int) -> MemoryItem | None:
        return self.session.scalars(_by_episode_seq(), {"episode": episode, "seq": seq}).first()

    def remove(self, tier: str, ref: str | int) -> bool:
        item = self.find(tier, ref)
        if item is None or item.status == "deleted":
            return False
        item.status, item.updated_at = "deleted", utcnow()
        self.session.flush()
        self._journal(item.id, "delete")
        self.lexical.remove(item.id)
        return True

    def set_status(self, item_ids: Iterable[int], status: str) -> int:
        changed = 0
        for item in self.session.scalars(select(MemoryItem).where(MemoryItem.id.in_(list(item_ids)))).all():
            if item.status != status and item.status != "deleted":
                item.status, item.updated_at = status, utcnow()
                self.session.flush()
                self._journal(item.id, "upsert")
                changed += 1
        return changed

    def active_unpinned_of(self, item_ids: Iterable[int]) -> list[int]:
        """Of these items, those active and not pinned."""
        ids = list(item_ids)
        if not ids:
            return []
        return [
            int(i)
            for i in self.session.scalars(
                select(MemoryItem.id).where(
                    MemoryItem.id.in_(ids), MemoryItem.status == "active", MemoryItem.pinned.is_(False)
                )
            ).all()
        ]

    def set_status_of(self, tier: str, ref: str | int, status: str) -> bool:
        item = self.find(tier, ref)
        return item is not None and self.set_status([item.id], status) > 0

    def archived(self, limit: int = 10) -> list[MemoryItem]:
        return list(
            self.session.scalars(
                select(MemoryItem)
                .where(MemoryItem.status == "archived")
                .order_by(MemoryItem.updated_at.desc(), MemoryItem.id.desc())
                .limit(limit)
            ).all()
        )

    def many(self, item_ids: Iterable[int]) -> dict[int, MemoryItem]:
        ids = list(item_ids)
        if not ids:
            return {}
        return {row.id: row for row in self.session.scalars(_by_ids(), {"ids": ids}).all()}

    def lines(self, item_ids: Iterable[int]) -> dict[int, Row[Unpack[tuple[Any, ...]]]]:
        """`many` as plain rows (by the same names; read only): the memory index's sync reads what changed after
        every write."""
        ids = list(item_ids)
        if not ids:
            return {}
        return {row.id: row for row in self.core(_lines_by_ids(), {"ids": ids}).all()}

    RANKING_COLUMNS = (
        MemoryItem.id,
        MemoryItem.tier,
        MemoryItem.status,
        MemoryItem.created_at,
        MemoryItem.author,
        MemoryItem.episode,
        MemoryItem.seq,
        MemoryItem.importance,
        MemoryItem.text,
        MemoryItem.event_at,
    )

    def ranking_rows(self, item_ids: Iterable[int], focus: bool = False) -> dict[int, RankingRow]:
        """What ranking reads of these items (plain rows, not entities: a query reads hundreds); their tags and
        emotions only with `focus` (decoding JSON is most of the cost)."""
        ids = sorted({int(i) for i in item_ids})
        found: dict[int, RankingRow] = {}
        q = _ranking_rows(focus)  # Core rows: no ORM bookkeeping for hundreds of rows a query
        for start in range(0, len(ids), 500):
            found.update({row.id: row for row in self.core(q, {"ids": ids[start : start + 500]})})
        return found

    def ranking_page(self, after_id: int, limit: int) -> list[RankingRow]:
        """The ranking rows of the next `limit` live items after `after_id`, by id (a restarted index's warm-up)."""
        q = (
            select(*self.RANKING_COLUMNS)
            .where(MemoryItem.id > after_id, MemoryItem.status != "deleted")
            .order_by(MemoryItem.id)
            .limit(limit)
        )
        return list(self.session.connection().execute(q))

    def at_positions(self, positions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """(episode, seq) -> the id of the live item there, for the positions that hold one: one index lookup per
        position (a VALUES list joined to the (episode, seq) index; `episode IN … AND seq IN …` would read every
        item of every episode named)."""
        wanted = sorted(set(positions))
        found: dict[tuple[str, int], int] = {}
        connection = self.session.connection()
        mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"  # the driver's own: SQLAlchemy's compile
        for start in range(0, len(wanted), 400):  # of hundreds of bound names costs more than the query
            page = wanted[start : start + 400]
            rows = ", ".join(f"({mark}, {mark})" for _ in page)
            sql = (
                f"WITH wanted(episode, seq) AS (VALUES {rows}) SELECT m.episode, m.seq, m.id FROM wanted "
                f"JOIN {MemoryItem.__tablename__} m ON m.episode = wanted.episode AND m.seq = wanted.seq WHERE m.status != 'deleted'"  # noqa: E501
            )
            found.update(
                {
                    (e, q): i
                    for e, q, i in connection.exec_driver_sql(
                        sql, tuple(value for e, q in page for value in (e, int(q)))
                    )
                }
            )
        return found

    def authors(self) -> set[str]:
        """Everyone who wrote a live item."""
        return set(
            self.session.scalars(select(MemoryItem.author).where(MemoryItem.status != "deleted").distinct()).all()
        )

    def touch(self, item_ids: Iterable[int], now: datetime) -> None:
        ids = list(item_ids)
        if ids:
            self.core(_touch(), {"ids": ids, "now": now})  # Core: counters, no memory history (as the ORM's bulk
            # UPDATE before it, which no flush saw either)

    def indexed(self, after_id: int = 0, limit: int | None = 5000) -> list[MemoryItem]:
        """Items that belong in the indexes (not deleted), by id, for building them from scratch."""
        q = select(MemoryItem).where(MemoryItem.id > after_id, MemoryItem.status != "deleted").order_by(MemoryItem.id)
        return list(self.session.scalars(q.limit(limit) if limit else q).all())

    def id_map(self, tier: str, refs: Iterable[str]) -> dict[str, int]:
        """ref -> item id, for the refs of `tier` that have an item."""
        refs = list(refs)
        if not refs:
            return {}
        return {ref: item_id for ref, item_id in self.core(_refs("id"), {"tier": tier, "refs": refs})}

    def statuses(self, tier: str, refs: Iterable[str | int]) -> dict[str, str]:
        """ref -> the item's status (active | archived | deleted), for the refs of `tier` that have an item."""
        refs = [str(r) for r in refs]
        if not refs:
            return {}
        return {ref: status for ref, status in self.core(_refs("status"), {"tier": tier, "refs": refs})}

    def ids_of(self, tier: str, refs: Iterable[str]) -> set[int]:
        refs = list(refs)
        if not refs:
            return set()
        return set(self.id_map(tier, refs).values())

    def newest_id(self) -> int:
        return self.session.scalar(select(func.max(MemoryItem.id))) or 0

    def journal_head(self) -> int:
        return self.core(_journal_head()).scalar() or 0

    def changed_since(self, journal_id: int, upto: int) -> list[int]:
        return list(self.core(_changed_since(), {"after": journal_id, "upto": upto}).scalars().all())

    def any_active(self, tiers: Iterable[str]) -> bool:
        """Whether any active item of these tiers exists (an index lookup, where `sample` sorts them all)."""
        return self.core(_any_active(tuple(tiers))).scalar() is not None

    def sample(self, tiers: Iterable[str], limit: int = 50, exclude_thread: str | None = None) -> list[MemoryItem]:
        """A random handful of active items of these tiers (flashbacks, knowledge-base stimuli)."""
        q = select(MemoryItem).where(MemoryItem.tier.in_(list(tiers)), MemoryItem.status == "active")
        if exclude_thread is not None:
            q = q.where((MemoryItem.thread_id.is_(None)) | (MemoryItem.thread_id != exclude_thread))
        return list(self.session.scalars(q.order_by(func.random()).limit(limit)).all())

    def sample_lines(
        self, tiers: Iterable[str], limit: int = 50, exclude_thread: str | None = None
    ) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """`sample` as plain rows of SAMPLE_COLUMNS (by the same names), for a reader of the tick's hot path."""
        return list(
            self.core(
                _sample_lines(tuple(tiers), exclude_thread is not None),
                {"limit": limit, "exclude_thread": exclude_thread},
            ).all()
        )

    def of_tier(self, tier: str, status: str | None = "active", limit: int | None = None) -> list[MemoryItem]:
        q = select(MemoryItem).where(MemoryItem.tier == tier)
        if status:
            q = q.where(MemoryItem.status == status)
        q = q.order_by(MemoryItem.id)
        return list(self.session.scalars(q.limit(limit) if limit else q).all())

    # ---- the memory manager's queries --------------------------------------------------------------------

    def novelty_candidates(self, after_id: int, upto_id: int, tiers: Iterable[str], limit: int) -> list[MemoryItem]:
        """Active items of these tiers in (after_id, upto_id], by id, that the manager may judge (never the
        human's words)."""
        return list(
            self.session.scalars(
                select(MemoryItem)
                .where(
                    MemoryItem.id > after_id,
                    MemoryItem.id <= upto_id,
                    MemoryItem.tier.in_(list(tiers)),
                    MemoryItem.status == "active",
                    _not_the_humans_words(),
                )
                .order_by(MemoryItem.id)
                .limit(limit)
            ).all()
        )

    def novelty_below(self, ceiling: float, upto_id: int, tiers: Iterable[str]) -> list[MemoryItem]:
        """Judged, active, unpinned items of these tiers up to `upto_id` whose novelty is under `ceiling`, least
        novel first (never the human's words)."""
        return list(
            self.session.scalars(
                select(MemoryItem)
                .where(
                    MemoryItem.id <= upto_id,
                    MemoryItem.tier.in_(list(tiers)),
                    MemoryItem.status == "active",
                    MemoryItem.pinned.is_(False),
                    MemoryItem.novelty.is_not(None),
                    MemoryItem.novelty < ceiling,
                    _not_the_humans_words(),
                )
                .order_by(MemoryItem.novelty, MemoryItem.id)
            ).all()
        )

    def _active_unpinned(self, tier: str) -> Select[MemoryItem]:
        return select(MemoryItem).where(
            MemoryItem.tier == tier, MemoryItem.status == "active", MemoryItem.pinned.is_(False)
        )

    def count_active_unpinned(self, tier: str) -> int:
        return self.session.scalar(select(func.count()).select_from(self._active_unpinned(tier).subquery())) or 0

    def active_unpinned(self, tier: str) -> list[MemoryItem]:
        return list(self.session.scalars(self._active_unpinned(tier)).all())

    # ---- the episodic summaries' queries -----------------------------------------------------------------

    def _written_between(self, tiers: Iterable[str], start: datetime, end: datetime) -> Select[MemoryItem]:
        return select(MemoryItem).where(
            MemoryItem.tier.in_(list(tiers)),
            MemoryItem.status != "deleted",
            MemoryItem.created_at >= start,
            MemoryItem.created_at < end,
        )

    def written_between(self, tiers: Iterable[str], start: datetime, end: datetime) -> list[MemoryItem]:
        """Items of these tiers (archived ones too) written in [start, end), oldest first."""
        q = self._written_between(tiers, start, end).order_by(MemoryItem.created_at, MemoryItem.id)
        return list(self.session.scalars(q).all())

    def any_written_between(self, tiers: Iterable[str], start: datetime, end: datetime) -> bool:
        return self.session.scalars(self._written_between(tiers, start, end).limit(1)).first() is not None
