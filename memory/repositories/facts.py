"""HMP `UnverifiedFacts`: claims below the confidence threshold, each with a fact-check task."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from memory.clock import utcnow
from memory.models import Task, UnverifiedFact
from memory.repositories.base import Repo
from memory.repositories.goals import CLOSED_TASK_STATUSES


class UnverifiedFactRepo(Repo):
    def add(
        self,
        claim: str,
        *,
        confidence: float,
        context: str = "",
        sources: Iterable[str] = (),
        why_unverified: str = "",
        priority: int = 0,
        message_id: int | None = None,
        task_id: int | None = None,
    ) -> UnverifiedFact:
        row = UnverifiedFact(
            claim=claim,
            confidence=confidence,
            context=context,
            sources=list(sources),
            why_unverified=why_unverified,
            priority=priority,
            message_id=message_id,
            task_id=task_id,
        )
        self.session.add(row)
        self.session.flush()
        return row

    def get(self, fact_id: int) -> UnverifiedFact:
        return self._get(UnverifiedFact, fact_id)

    def update(
        self,
        fact_id: int,
        *,
        claim: str | None = None,
        context: str | None = None,
        confidence: float | None = None,
        priority: int | None = None,
    ) -> UnverifiedFact:
        """A human's edit of the claim itself (its outcome goes through `resolve`)."""
        fact = self.get(fact_id)
        for name, value in (("claim", claim), ("context", context), ("confidence", confidence), ("priority", priority)):
            if value is not None:
                setattr(fact, name, value)
        self.session.flush()
        return fact

    def purge(self, fact_id: int) -> None:
        """Delete the fact for good (a human's delete); its fact-check task stays."""
        self.session.delete(self.get(fact_id))

    def register(self, message_id: int, facts: list[dict[str, Any]], threshold: float = 0.7) -> list[UnverifiedFact]:
        """The facts of one output (idempotent per message). Below `threshold` a fact is `pending` with a
        fact-check task: its own when its priority is 2 or more, else one task shared by the message's others."""
        existing = self.of_message(message_id)
        if existing:
            return existing
        rows, shared = [], None
        for fact in facts:
            row = self.add(
                fact["claim"],
                confidence=float(fact.get("confidence", 0.5)),
                context=fact.get("context", ""),
                sources=fact.get("sources") or [],
                why_unverified=fact.get("why_unverified", ""),
                priority=int(fact.get("priority") or 0),
                message_id=message_id,
            )
            if row.confidence < threshold:
                row.status = "pending"
                if row.priority >= 2:
                    task = Task(
                        title=f"fact-check: {row.claim[:200]}",
                        kind="fact-check",
                        priority=row.priority,
                        description=f"confidence {row.confidence:.2f}; {row.why_unverified}".strip("; "),
                    )
                    self.session.add(task)
                    self.session.flush()
                else:
                    if shared is None:
                        shared = Task(title=f"fact-check claims of message {message_id}", kind="fact-check", priority=1)
                        self.session.add(shared)
                        self.session.flush()
                    task = shared
                    task.description = "; ".join(
                        filter(None, [task.description, f"{row.claim[:160]} ({row.confidence:.2f})"])
                    )
                row.task_id = task.id
            rows.append(row)
        return rows

    def of_message(self, message_id: int) -> list[UnverifiedFact]:
        return list(
            self.session.scalars(
                select(UnverifiedFact).where(UnverifiedFact.message_id == message_id).order_by(UnverifiedFact.id)
            ).all()
        )

    def list(self, *, status: str | None = None, limit: int = 20) -> list[UnverifiedFact]:
        q = select(UnverifiedFact)
        if status:
            q = q.where(UnverifiedFact.status == status)
        return list(
            self.session.scalars(q.order_by(UnverifiedFact.priority.desc(), UnverifiedFact.id).limit(limit)).all()
        )

    def resolve(self, fact_id: int, status: str, resolution: str = "") -> UnverifiedFact:
        """verified | rejected; the fact-check task closes with it (done / failed)."""
        if status not in ("verified", "rejected"):
            raise ValueError(f"a fact is resolved as verified or rejected, not {status!r}")
        fact = self.get(fact_id)
        fact.status, fact.resolution = status, resolution or None
        if (
            fact.task_id is not None
            and (task := self.session.get(Task, fact.task_id)) is not None
            and task.status not in CLOSED_TASK_STATUSES
        ):
            open_facts = [
                f
                for f in self.session.scalars(select(UnverifiedFact).where(UnverifiedFact.task_id == task.id)).all()
                if f.status in ("open", "pending")
            ]
            if not open_facts:
                task.status, task.completed_at, task.updated_at = "done", utcnow(), utcnow()
        return fact
