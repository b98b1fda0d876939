"""The persona's own catalogues (HMP "Утилиты и расширения"): tables it makes for its data (`agent_tables`: rows as
JSON over named columns), and ratings, external services and external accounts (`agent_records`, one kind each).
A rating scores a subject from −5 to +5 (`strategy:<name>` ratings also order the loop-breaking strategies); an
account names a service, a handle and at most the environment variable its secret lives in (never the secret).
Deleting archives (restorable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from managers.errors import Refused

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import AgentRecord, AgentTable, AgentTableRow

MAX_ROW_CHARS = 4000  # a table row, as text
RATING, SERVICE, ACCOUNT = "rating", "external_service", "external_account"  # the kinds of agent_records


class CatalogueManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    # -- agent_tables ------------------------------------------------------------------------------------------------

    def tables(self) -> list[tuple[AgentTable, int]]:
        """The active tables, each with its number of rows."""
        return [(table, self.repos.tables.count(table)) for table in self.repos.tables.list()]

    def add_table(self, *, name: str, columns: list[str], description: str = "") -> AgentTable:
        """A new table (repeated columns once); Refused when an active table has the name."""
        try:
            return self.repos.tables.add(name, list(dict.fromkeys(columns)), description)
        except ValueError as exc:
            raise Refused(str(exc)) from None

    def insert_row(self, *, table: str, row: dict[str, Any]) -> tuple[AgentTable, AgentTableRow]:
        """The row added to the active table `table`; Refused for a column the table lacks or a row too long."""
        found = self.repos.tables.active(table)
        data = dict(row)
        unknown = [k for k in data if k not in found.columns]
        if unknown:
            raise Refused(
                f"{found.name} has no column {', '.join(map(repr, unknown))} (its columns: {', '.join(found.columns)})"
            )
        if len(str(data)) > MAX_ROW_CHARS:
            raise Refused(f"a row is at most {MAX_ROW_CHARS:,} characters")
        return found, self.repos.tables.insert(found, data)

    def read_table(
        self, *, table: str, where: dict[str, Any] | None = None, limit: int = 20
    ) -> tuple[AgentTable, list[AgentTableRow]]:
        """The active table and its rows newest first, those whose columns equal `where` (compared as text)."""
        found = self.repos.tables.active(table)
        return found, self.repos.tables.rows(found, where=where or {}, limit=limit)

    def archive_table(self, name: str) -> AgentTable:
        table = self.repos.tables.active(name)
        if not self.repos.tables.archive(table.id):
            raise Refused(f"table {table.name} is archived already")
        return table

    # -- ratings, external services, external accounts ---------------------------------------------------------------

    def ratings(self, prefix: str | None = None) -> list[AgentRecord]:
        return self.repos.records.list(RATING, prefix=prefix)

    def rate(self, *, subject: str, score: int, comment: str = "") -> tuple[AgentRecord, bool]:
        """Rate `subject` (rating it again replaces the score); (row, whether it replaced one)."""
        return self.repos.records.put(RATING, subject, {"score": int(score), "comment": comment})

    def archive_rating(self, ref: str | int) -> AgentRecord:
        row = self.repos.records.find(RATING, ref)
        return self._archived(row, f"rating of {row.name}")

    def services(self) -> list[AgentRecord]:
        return self.repos.records.list(SERVICE)

    def put_service(
        self, *, name: str, url: str = "", kind: str = "", description: str = ""
    ) -> tuple[AgentRecord, bool]:
        """Add the service or replace the one of that name; (row, whether it replaced one)."""
        return self.repos.records.put(SERVICE, name, {"url": url, "kind": kind, "description": description})

    def archive_service(self, ref: str | int) -> AgentRecord:
        row = self.repos.records.find(SERVICE, ref)
        return self._archived(row, f"service {row.name}")

    def accounts(self) -> list[AgentRecord]:
        return self.repos.records.list(ACCOUNT)

    def put_account(
        self, *, name: str, service: str, handle: str = "", credential_env: str | None = None, description: str = ""
    ) -> tuple[AgentRecord, bool]:
        """Add the account or replace the one of that name; the service must be known (NotFound otherwise). Only
        the name of the environment variable holding its secret is kept, never the secret."""
        self.repos.records.find(SERVICE, service)
        return self.repos.records.put(
            ACCOUNT,
            name,
            {"service": service, "handle": handle, "credential_env": credential_env, "description": description},
        )

    def archive_account(self, ref: str | int) -> AgentRecord:
        row = self.repos.records.find(ACCOUNT, ref)
        return self._archived(row, f"account {row.name}")

    def _archived(self, row: AgentRecord, label: str) -> AgentRecord:
        if not self.repos.records.archive(row.id):
            raise Refused(f"{label} is archived already")
        return row


__all__ = ["ACCOUNT", "MAX_ROW_CHARS", "RATING", "SERVICE", "CatalogueManager"]
