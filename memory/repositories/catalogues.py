"""The persona's own catalogues (HMP "Утилиты и расширения"): tables it makes for its data (`agent_tables`, rows as
JSON), and ratings, external services and external accounts (`agent_records`, one kind each). Deleting archives."""

from __future__ import annotations

import builtins
from typing import Any

from sqlalchemy import select

from memory.clock import utcnow
from memory.models import AgentRecord, AgentTable, AgentTableRow
from memory.repositories.base import Archivable, NamedRowRepo, NotFound, Repo


class AgentTableRepo(NamedRowRepo):
    model, what = AgentTable, "table"

    def add(self, name: str, columns: list[str], description: str) -> AgentTable:
        existing = self.session.scalars(select(AgentTable).where(AgentTable.name == name)).first()
        if existing is not None and existing.status == "active":
            raise ValueError(f"a table named {name!r} exists already")
        if existing is not None:  # an archived one of that name: made anew, its old rows stay with it archived
            existing.name = f"{name}~{existing.id}"
            self.session.flush()
        row = AgentTable(name=name, columns=list(columns), description=description)
        self.session.add(row)
        self.session.flush()
        return row

    def active(self, name: str) -> AgentTable:
        row: AgentTable = self.find(name)
        if row.status != "active":
            raise NotFound(f"no table {name!r}")
        return row

    def list(self, include_archived: bool = False) -> list[AgentTable]:
        q = select(AgentTable)
        if not include_archived:
            q = q.where(AgentTable.status == "active")
        return list(self.session.scalars(q.order_by(AgentTable.name)).all())

    def insert(self, table: AgentTable, data: dict[str, Any]) -> AgentTableRow:
        row = AgentTableRow(table_id=table.id, data=dict(data))
        self.session.add(row)
        self.session.flush()
        return row

    def rows(
        self, table: AgentTable, *, where: dict[str, Any] | None = None, limit: int = 20
    ) -> builtins.list[AgentTableRow]:
        """Rows newest first, those whose columns equal `where` (compared as text)."""
        found = []
        for row in self.session.scalars(
            select(AgentTableRow).where(AgentTableRow.table_id == table.id).order_by(AgentTableRow.id.desc())
        ).all():
            if all(str(row.data.get(k)) == str(v) for k, v in (where or {}).items()):
                found.append(row)
                if len(found) >= limit:
                    break
        return found

    def count(self, table: AgentTable) -> int:
        return len(self.session.scalars(select(AgentTableRow.id).where(AgentTableRow.table_id == table.id)).all())


class RecordRepo(Archivable, Repo):
    """Ratings, external services and external accounts."""

    def put(self, kind: str, name: str, data: dict[str, Any]) -> tuple[AgentRecord, bool]:
        """Add the entry, or replace an archived or existing one of that name; (row, replaced)."""
        row = self.session.scalars(
            select(AgentRecord).where(AgentRecord.kind == kind, AgentRecord.name == name)
        ).first()
        if row is None:
            row = AgentRecord(kind=kind, name=name, data=dict(data))
            self.session.add(row)
            self.session.flush()
            return row, False
        row.data, row.status, row.updated_at = dict(data), "active", utcnow()
        self.session.flush()
        return row, True

    def list(self, kind: str, *, prefix: str | None = None, include_archived: bool = False) -> list[AgentRecord]:
        q = select(AgentRecord).where(AgentRecord.kind == kind)
        if prefix:
            q = q.where(AgentRecord.name.startswith(prefix, autoescape=True))
        if not include_archived:
            q = q.where(AgentRecord.status == "active")
        return list(self.session.scalars(q.order_by(AgentRecord.name)).all())

    def find(self, kind: str, ref: str | int) -> AgentRecord:
        row = (
            self.session.get(AgentRecord, int(ref))
            if str(ref).isdigit()
            else self.session.scalars(
                select(AgentRecord).where(AgentRecord.kind == kind, AgentRecord.name == str(ref))
            ).first()
        )
        if row is None or row.kind != kind:
            raise NotFound(f"no {kind.replace('_', ' ')} {ref!r}")
        return row

    def scores(self, prefix: str) -> dict[str, float]:
        """Rating scores by subject (without `prefix`), e.g. the persona's ratings of its loop-breaking strategies."""
        return {r.name[len(prefix) :]: float(r.data.get("score", 0)) for r in self.list("rating", prefix=prefix)}

    def _set_status(self, row_id: int, status: str) -> bool:
        row = self.session.get(AgentRecord, int(row_id))
        if row is None or row.status == status:
            return False
        row.status, row.updated_at = status, utcnow()
        self.session.flush()
        return True
