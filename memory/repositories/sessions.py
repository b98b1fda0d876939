"""Epos sessions: one run of a loop on a thread, from start to stop, with what it needs to be revived."""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import select

from memory.models import Session as SessionRow
from memory.repositories.base import Repo


class SessionRepo(Repo):
    def start(
        self,
        thread_id: str,
        *,
        playbook: str,
        persona: str,
        owner: str | None,
        tick: int,
        first_message_id: int,
        now: datetime,
        revived_from: int | None = None,
    ) -> SessionRow:
        row = SessionRow(
            thread_id=thread_id,
            playbook=playbook,
            persona=persona,
            owner=owner,
            first_tick=tick,
            last_tick=tick,
            first_message_id=first_message_id,
            started_at=now,
            revived_from=revived_from,
        )
        self.session.add(row)
        self.session.flush()
        return row

    def get(self, session_id: int) -> SessionRow | None:
        return self.session.get(SessionRow, session_id)

    def list(self, limit: int = 50, thread_id: str | None = None) -> list[SessionRow]:
        q = select(SessionRow)
        if thread_id is not None:
            q = q.where(SessionRow.thread_id == thread_id)
        return list(self.session.scalars(q.order_by(SessionRow.id.desc()).limit(limit)).all())

    def running(self) -> builtins.list[SessionRow]:
        return list(self.session.scalars(select(SessionRow).where(SessionRow.status == "running")).all())

    def last_of(self, thread_id: str) -> SessionRow | None:
        return self.session.scalars(
            select(SessionRow).where(SessionRow.thread_id == thread_id).order_by(SessionRow.id.desc()).limit(1)
        ).first()
