"""The mesh's tables: containers in and out (one row per container id), refusals, subscriptions,
revoked keys (MeshRepo); peers' evaluations and the blocklist (TrustRepo). The rules are managers/mesh.py's and
managers/reputation.py's."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Text, cast, delete, func, select, update

from memory.models import (
    MeshBlock,
    MeshContainer,
    MeshEvaluation,
    MeshRefusal,
    MeshRevocation,
    MeshSubscription,
)
from memory.repositories.base import Repo

CHUNK = 500  # ids per IN (…) list


class MeshRepo(Repo):
    # ---- containers ---------------------------------------------------------------------------------------------
    def add(self, row: MeshContainer) -> MeshContainer:
        self.session.add(row)
        self.session.flush()
        return row

    def get(self, container_id: str) -> MeshContainer | None:
        return self.session.get(MeshContainer, container_id)

    def outbox(self, limit: int) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer)
                .where(MeshContainer.direction == "out", MeshContainer.status == "queued")
                .order_by(MeshContainer.created_at)
                .limit(limit)
            ).all()
        )

    def outbox_count(self) -> int:
        """How many containers wait in the outbox."""
        return int(
            self.session.scalar(
                select(func.count())
                .select_from(MeshContainer)
                .where(MeshContainer.direction == "out", MeshContainer.status == "queued")
            )
            or 0
        )

    def mark_sent(self, ids: builtins.list[str], at: datetime) -> int:
        total = 0
        for start in range(0, len(ids), CHUNK):
            result = self.session.execute(
                update(MeshContainer)
                .where(MeshContainer.id.in_(ids[start : start + CHUNK]), MeshContainer.direction == "out")
                .values(status="sent", sent_at=at)
            )
            total += int(result.rowcount)  # type: ignore[attr-defined]
        return total

    def published(self, topic: str) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer).where(
                    MeshContainer.direction == "out", MeshContainer.type == "cogsync", MeshContainer.topic == topic
                )
            ).all()
        )

    def learned(self, limit: int) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer)
                .where(MeshContainer.direction == "in", MeshContainer.local_tier.is_not(None))
                .order_by(MeshContainer.created_at.desc())
                .limit(limit)
            ).all()
        )

    def note_applied(self, note_id: str) -> bool:
        """Whether a friend's note (the id of its origin container) already became a note here."""
        return (
            self.session.scalars(
                select(MeshContainer.id)
                .where(
                    MeshContainer.type == "note", MeshContainer.ref == note_id, MeshContainer.local_tier.is_not(None)
                )
                .limit(1)
            ).first()
            is not None
        )

    def of_case(self, case_id: str) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer).where((MeshContainer.id == case_id) | (MeshContainer.ref == case_id))
            ).all()
        )

    def cases(self, limit: int) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer)
                .where(MeshContainer.type.in_(("ethics_case", "claim")))
                .order_by(MeshContainer.created_at.desc())
                .limit(limit)
            ).all()
        )

    def from_peers(self, types: Iterable[str], me: str, limit: int) -> builtins.list[MeshContainer]:
        """Containers of these types peers sent to everyone or to `me`, newest first."""
        return list(
            self.session.scalars(
                select(MeshContainer)
                .where(
                    MeshContainer.direction == "in",
                    MeshContainer.type.in_(tuple(types)),
                    MeshContainer.recipient.is_(None) | (MeshContainer.recipient == me),
                )
                .order_by(MeshContainer.created_at.desc())
                .limit(limit)
            ).all()
        )

    def sent_of_type(self, type_: str) -> builtins.list[MeshContainer]:
        return list(
            self.session.scalars(
                select(MeshContainer).where(MeshContainer.direction == "out", MeshContainer.type == type_)
            ).all()
        )

    def became(self, tier: str, local_id: int) -> MeshContainer | None:
        """The peer's container a local row was made from (a goal accepted, a concept learned), if any."""
        return self.session.scalars(
            select(MeshContainer)
            .where(
                MeshContainer.direction == "in", MeshContainer.local_tier == tier, MeshContainer.local_id == local_id
            )
            .limit(1)
        ).first()

    def ids(self, limit: int) -> builtins.list[str]:
        """Held containers, newest first: neither rejected nor still waiting in the outbox."""
        return list(
            self.session.scalars(
                select(MeshContainer.id)
                .where(MeshContainer.status.not_in(("rejected", "queued")))
                .order_by(MeshContainer.created_at.desc())
                .limit(limit)
            ).all()
        )

    def existing(self, ids: builtins.list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), CHUNK):
            found |= set(
                self.session.scalars(
                    select(MeshContainer.id).where(MeshContainer.id.in_(ids[start : start + CHUNK]))
                ).all()
            )
        return found

    def many(self, ids: builtins.list[str]) -> builtins.list[MeshContainer]:
        rows: list[MeshContainer] = []
        for start in range(0, len(ids), CHUNK):
            rows += self.session.scalars(select(MeshContainer).where(MeshContainer.id.in_(ids[start : start + CHUNK])))
        return rows

    def kept_sizes(self) -> builtins.list[tuple[str, str, str | None, str | None, int]]:
        """(sender, type, topic, recipient, bytes) of every container that arrived and is kept (its body's JSON
        length: what the store's quota counts)."""
        size = func.length(cast(MeshContainer.body, Text))
        rows = (
            self.session.execute(
                select(
                    MeshContainer.sender,
                    MeshContainer.type,
                    MeshContainer.topic,
                    MeshContainer.recipient,
                    func.sum(size),
                )
                .where(MeshContainer.direction == "in")
                .group_by(MeshContainer.sender, MeshContainer.type, MeshContainer.topic, MeshContainer.recipient)
            )
            .tuples()
            .all()
        )
        return [(str(s), str(t), topic, recipient, int(n or 0)) for s, t, topic, recipient, n in rows]

    def trim_refusals(self, keep: int) -> int:
        """Keep the newest `keep` refusals (what floods the door cannot grow its table without bound)."""
        newest = self.session.scalar(select(func.max(MeshRefusal.id))) or 0
        if newest <= keep:
            return 0
        return int(self.session.execute(delete(MeshRefusal).where(MeshRefusal.id <= newest - keep)).rowcount)  # type: ignore[attr-defined]

    def counts(self) -> dict[str, int]:
        rows = (
            self.session.execute(
                select(MeshContainer.direction, MeshContainer.status, func.count()).group_by(
                    MeshContainer.direction, MeshContainer.status
                )
            )
            .tuples()
            .all()
        )
        return {f"{direction}_{status}": int(count) for direction, status, count in rows}

    # ---- refusals -------------------------------------------------------------------------------------------------
    def refuse(self, row: MeshRefusal) -> None:
        self.session.add(row)
        self.session.flush()

    def refused_counts(self, did: str | None = None) -> dict[str, int]:
        query = select(MeshRefusal.reason, func.count()).group_by(MeshRefusal.reason)
        if did is not None:
            query = query.where(MeshRefusal.sender == did)
        return {str(reason): int(count) for reason, count in self.session.execute(query).tuples().all()}

    def refused_by_sender(self) -> dict[str, int]:
        return {
            str(s): int(n)
            for s, n in self.session.execute(select(MeshRefusal.sender, func.count()).group_by(MeshRefusal.sender))
            .tuples()
            .all()
            if s
        }

    def refused_recent(self, limit: int) -> builtins.list[MeshRefusal]:
        return list(self.session.scalars(select(MeshRefusal).order_by(MeshRefusal.id.desc()).limit(limit)).all())

    # ---- subscriptions and revoked keys ---------------------------------------------------------------------------
    def subscribe(self, topic: str, at: datetime) -> bool:
        if self.session.get(MeshSubscription, topic) is not None:
            return False
        self.session.add(MeshSubscription(topic=topic, at=at))
        self.session.flush()
        return True

    def unsubscribe(self, topic: str) -> bool:
        return bool(self.session.execute(delete(MeshSubscription).where(MeshSubscription.topic == topic)).rowcount)  # type: ignore[attr-defined]

    def topics(self) -> builtins.list[str]:
        return list(self.session.scalars(select(MeshSubscription.topic)).all())

    def revocation(self, did: str) -> MeshRevocation | None:
        return self.session.get(MeshRevocation, did)

    def revoke(self, did: str, *, replaced_by: str | None, container_id: str | None, at: datetime) -> None:
        if self.session.get(MeshRevocation, did) is None:
            self.session.add(MeshRevocation(did=did, replaced_by=replaced_by, container_id=container_id, at=at))
            self.session.flush()


class TrustRepo(Repo):
    def add(self, row: MeshEvaluation) -> MeshEvaluation:
        self.session.add(row)
        self.session.flush()
        return row

    def of(self, subject: str, before: datetime | None = None) -> builtins.list[MeshEvaluation]:
        query = select(MeshEvaluation).where(MeshEvaluation.subject == subject)
        if before is not None:
            query = query.where(MeshEvaluation.at <= before)
        return list(self.session.scalars(query).all())

    def first_at(self, subject: str) -> datetime | None:
        return self.session.scalar(select(func.min(MeshEvaluation.at)).where(MeshEvaluation.subject == subject))

    def all(self) -> builtins.list[MeshEvaluation]:
        return list(self.session.scalars(select(MeshEvaluation).order_by(MeshEvaluation.at, MeshEvaluation.id)).all())

    def subjects(self) -> dict[str, int]:
        return {
            str(s): int(n)
            for s, n in self.session.execute(
                select(MeshEvaluation.subject, func.count()).group_by(MeshEvaluation.subject)
            )
            .tuples()
            .all()
        }

    def block(self, did: str, reason: str, at: datetime) -> None:
        if self.session.get(MeshBlock, did) is None:
            self.session.add(MeshBlock(did=did, reason=reason, at=at))
            self.session.flush()

    def unblock(self, did: str) -> bool:
        return bool(self.session.execute(delete(MeshBlock).where(MeshBlock.did == did)).rowcount)  # type: ignore[attr-defined]

    def blocked(self, did: str) -> bool:
        return self.session.get(MeshBlock, did) is not None

    def blocklist(self) -> builtins.list[MeshBlock]:
        return list(self.session.scalars(select(MeshBlock).order_by(MeshBlock.at)).all())


__all__ = ["MeshRepo", "TrustRepo"]
