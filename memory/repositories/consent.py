"""The consent layer's tables: the approvals a command waits for, and the audit trail of every decision.

An approval moves pending → approved | denied | expired (by `decide`), and approved → executed | failed (by
`mark_executed` / `mark_failed`). Each move is a conditional UPDATE that only succeeds from the state it
starts from, so when two processes race (the loop and a human's CLI, or two loops), exactly one wins.
"""

from __future__ import annotations

import builtins
import json
from datetime import datetime
from typing import Any, Unpack

from sqlalchemy import Row, Select, bindparam, select, update

from memory.models import Approval, AuditEntry
from memory.repositories.base import NotFound, Repo, matched, prepared, table_of

EFFECTS = ("read", "write_self", "modify_self", "external")
DECISION_STATUSES = ("approved", "denied", "expired")
AUDIT_DECISIONS = (
    "requested",
    "approved",
    "denied",
    "auto_approved",
    "validated",
    "blocked",
    "executed",
    "failed",
    "expired",
    "refused",
    "trusted",
)
AUDIT_ACTORS = ("human", "policy", "validators", "auto_pass", "loop", "ethics")


def canonical_args(args: dict[str, Any] | None) -> str:
    """Arguments as one JSON text regardless of key order: equal texts ask for the same thing."""
    return json.dumps(args or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _one_of(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field} must be one of {', '.join(allowed)}, not {value!r}")


@prepared
def _approved(of_root: bool) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: approved approvals not yet run, as plain rows (every column)."""
    table = table_of(Approval)
    q = select(table).where(table.c.status == "approved")
    return (q.where(table.c.root_thread == bindparam("root_thread")) if of_root else q).order_by(table.c.id)


class ApprovalRepo(Repo):
    def request(self, **fields: Any) -> tuple[Approval, bool]:
        """Ask for approval of a command; returns (the approval, whether it was created now).

        The same command asking again (a re-run after a kill: the same `cmd_key`) gets its own request back,
        and a command asking for what already waits (same type, same arguments) gets the waiting one."""
        _one_of("effect", fields.get("effect"), EFFECTS)
        if "status" in fields:
            raise ValueError("a request starts pending; decide() and mark_*() move it on")
        existing = self.by_cmd_key(fields["cmd_key"])
        if existing is not None:
            return existing, False
        wanted = canonical_args(fields.get("args"))
        for row in self.session.scalars(
            select(Approval).where(Approval.status == "pending", Approval.type == fields["type"]).order_by(Approval.id)
        ).all():
            if canonical_args(row.args) == wanted:
                return row, False
        row = Approval(**fields)
        self.session.add(row)
        self.session.flush()
        return row, True

    def get(self, approval_id: int) -> Approval | None:
        return self.session.get(Approval, int(approval_id))

    def by_cmd_key(self, cmd_key: str) -> Approval | None:
        return self.session.scalars(select(Approval).where(Approval.cmd_key == cmd_key)).first()

    def pending(self, limit: int | None = None) -> list[Approval]:
        """Waiting approvals, oldest first."""
        q = select(Approval).where(Approval.status == "pending").order_by(Approval.id)
        return list(self.session.scalars(q.limit(limit) if limit else q).all())

    def list(self, status: str | None = None, limit: int = 50) -> list[Approval]:
        """Approvals newest first, of one status or all."""
        q = select(Approval)
        if status is not None:
            q = q.where(Approval.status == status)
        return list(self.session.scalars(q.order_by(Approval.id.desc()).limit(limit)).all())

    def decide(self, approval_id: int, status: str, by: str, reason: str, now: datetime) -> Approval:
        """Approve, deny or expire a pending approval. Raises ValueError naming its status when it is not pending
        (someone decided first), NotFound when there is no such approval."""
        _one_of("a decision", status, DECISION_STATUSES)
        moved = self._move(approval_id, "pending", status=status, decided_at=now, decided_by=by, decision_reason=reason)
        row = self.session.get(Approval, int(approval_id), populate_existing=True)
        if row is None:
            raise NotFound(f"no approval {approval_id}")
        if not moved:
            raise ValueError(f"approval {approval_id} is {row.status}, not pending: it cannot be {status} now")
        return row

    def approved_unexecuted(self, root_thread: str | None = None) -> builtins.list[Row[Unpack[tuple[Any, ...]]]]:
        """Approved and not yet run, oldest first (of one root thread's commands, or all), as plain rows (by the
        same names; read only: every tick asks, and each one runs in its own unit that reads it again)."""
        return list(self.core(_approved(root_thread is not None), {"root_thread": root_thread}).all())

    def mark_executed(self, approval_id: int, result: str, now: datetime) -> bool:
        """Record that the approved command ran; False when another process recorded it first (then this
        caller must not run it)."""
        return self._move(approval_id, "approved", status="executed", result=result, executed_at=now)

    def mark_failed(self, approval_id: int, result: str, now: datetime) -> bool:
        return self._move(approval_id, "approved", status="failed", result=result, executed_at=now)

    def decided_since(self, after: datetime) -> builtins.list[Approval]:
        """Approvals decided after `after`, in the order they were decided (what an idle loop wakes up for)."""
        return list(
            self.session.scalars(
                select(Approval).where(Approval.decided_at > after).order_by(Approval.decided_at, Approval.id)
            ).all()
        )

    def _move(self, approval_id: int, from_status: str, **values: Any) -> bool:
        result = self.session.execute(
            update(Approval).where(Approval.id == int(approval_id), Approval.status == from_status).values(**values)
        )
        return matched(result) == 1


class AuditRepo(Repo):
    def add(self, **fields: Any) -> AuditEntry:
        _one_of("decision", fields.get("decision"), AUDIT_DECISIONS)
        _one_of("actor", fields.get("actor"), AUDIT_ACTORS)
        row = AuditEntry(**fields)
        self.session.add(row)
        self.session.flush()
        return row

    def recent(self, limit: int = 50, thread_id: str | None = None) -> list[AuditEntry]:
        """The last `limit` entries (of one thread, or all), oldest first."""
        q = select(AuditEntry)
        if thread_id is not None:
            q = q.where(AuditEntry.thread_id == thread_id)
        return list(reversed(self.session.scalars(q.order_by(AuditEntry.id.desc()).limit(limit)).all()))

    def for_approval(self, approval_id: int) -> list[AuditEntry]:
        return list(
            self.session.scalars(
                select(AuditEntry).where(AuditEntry.approval_id == approval_id).order_by(AuditEntry.id)
            ).all()
        )
