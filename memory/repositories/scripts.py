"""Scripts the persona wrote (HMP `agent_scripts`, data until run) and the background runs behind process_log rows
(scripts in their sandbox, questions to another model)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from memory.clock import utcnow
from memory.models import AgentScript, ProcessRun
from memory.repositories.base import NamedRowRepo, NotFound, Repo

FINISHED = ("ok", "error", "timeout", "killed", "offline")


class ScriptRepo(NamedRowRepo):
    model, what = AgentScript, "script"

    def get(self, name: str, *, include_archived: bool = False) -> AgentScript:
        q = select(AgentScript).where(AgentScript.name == name)
        row = self.session.scalars(q).first()
        if row is None or (row.status != "active" and not include_archived):
            raise NotFound(f"no script {name!r}")
        return row

    def save(self, name: str, language: str, code: str, description: str) -> tuple[AgentScript, bool]:
        """Add the script, or replace an archived one of that name; (row, replaced an older one)."""
        row = self.session.scalars(select(AgentScript).where(AgentScript.name == name)).first()
        if row is None:
            row = AgentScript(name=name, language=language, code=code, description=description)
            self.session.add(row)
            self.session.flush()
            return row, False
        row.language, row.code, row.description, row.status, row.updated_at = (
            language,
            code,
            description,
            "active",
            utcnow(),
        )
        self.session.flush()
        return row, True

    def list(self, *, include_archived: bool = False) -> list[AgentScript]:
        q = select(AgentScript)
        if not include_archived:
            q = q.where(AgentScript.status == "active")
        return list(self.session.scalars(q.order_by(AgentScript.name)).all())


class ProcessRunRepo(Repo):
    def add(
        self, process_id: int, kind: str, *, thread_id: str | None, spec: dict[str, Any], script_id: int | None = None
    ) -> ProcessRun:
        row = ProcessRun(process_id=process_id, kind=kind, thread_id=thread_id, spec=spec, script_id=script_id)
        self.session.add(row)
        self.session.flush()
        return row

    def get(self, run_id: int) -> ProcessRun:
        return self._get(ProcessRun, run_id)

    def of_process(self, process_id: int) -> ProcessRun | None:
        return self.session.scalars(select(ProcessRun).where(ProcessRun.process_id == process_id)).first()

    def started(self, run_id: int, *, pid: int | None, owner: str, workdir: str | None, now: datetime) -> ProcessRun:
        row = self.get(run_id)
        row.status, row.pid, row.owner, row.workdir, row.started_at = "running", pid, owner, workdir, now
        self.session.flush()
        return row

    def finished(self, run_id: int, status: str, *, output: str, exit_code: int | None, now: datetime) -> ProcessRun:
        row = self.get(run_id)
        row.status, row.output, row.exit_code, row.finished_at = status, output, exit_code, now
        self.session.flush()
        return row

    def with_status(self, *statuses: str) -> list[ProcessRun]:
        return list(
            self.session.scalars(
                select(ProcessRun).where(ProcessRun.status.in_(statuses)).order_by(ProcessRun.id)
            ).all()
        )

    def recent(self, limit: int = 20) -> list[ProcessRun]:
        return list(self.session.scalars(select(ProcessRun).order_by(ProcessRun.id.desc()).limit(limit)).all())

    def delete_for(self, process_ids: list[int]) -> int:
        rows = self.session.scalars(select(ProcessRun).where(ProcessRun.process_id.in_(process_ids))).all()
        for row in rows:
            self.session.delete(row)
        self.session.flush()
        return len(rows)


__all__ = ["FINISHED", "NotFound", "ProcessRunRepo", "ScriptRepo"]
