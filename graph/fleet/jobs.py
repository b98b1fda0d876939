"""The job engine of a deployment: procrastinate on the deployment's PostgreSQL database.

Every piece of a persona's work is a job — a tick, a dream, a task sub-cycle's tick, a knowledge-base indexing, a
session export — and every job of a persona carries the lock `persona:<name>`: the engine never starts one while
another of the same persona runs, whichever worker holds it. A persona thinks as a chain: each tick job defers the
next (`tick:<name>` is a queueing lock, so at most one waits), scheduled after the persona's pause. A human's note
defers a `wake` tick at a higher priority, which the engine's LISTEN/NOTIFY hands to an idle worker at once; a
scheduled tick of the same persona never blocks it. A worker killed mid-job leaves its job `doing` with a stale
heartbeat; the other workers' watchdog (graph/fleet/worker.py) gives it back to the queue with the engine's own
`retry_job`, and the next worker resumes the persona from its PostgreSQL checkpoint.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from memory.clock import utcnow

if TYPE_CHECKING:
    import procrastinate

    from memory.fleet import Fleet

log = logging.getLogger(__name__)

QUEUE = "anima"
TICK, DREAM, TASK_TICK, INDEX, EXPORT = "anima.tick", "anima.dream", "anima.task_tick", "anima.index", "anima.export"
# higher first among a persona's waiting jobs: what a human waits for, then upkeep, then the next thought
PRIORITY = {"wake": 10, "index": 8, "export": 8, "dream": 5, "task": 2, "tick": 0}


def lock_of(name: str) -> str:
    return f"persona:{name}"


def make_app(conninfo: str, *, worker: bool = False, pool_size: int = 4) -> procrastinate.App:
    """A procrastinate App on the deployment's database. A worker's is asynchronous (it runs jobs); anyone else's
    (the command line, the web app) only defers and looks up jobs, synchronously."""
    import procrastinate

    pool_kwargs = {"connect_timeout": 5}
    connector: procrastinate.BaseConnector
    if worker:
        connector = procrastinate.PsycopgConnector(
            conninfo=conninfo, min_size=1, max_size=pool_size, kwargs=pool_kwargs
        )
    else:
        connector = procrastinate.SyncPsycopgConnector(
            conninfo=conninfo, min_size=1, max_size=pool_size, kwargs=pool_kwargs
        )
    return procrastinate.App(connector=connector)


def ensure_job_schema(app: procrastinate.App, fleet: Fleet) -> None:
    """The engine's tables, created once per database (under the schema lock every anima process takes)."""
    from memory.db import schema_lock

    with fleet.registry() as registry:
        if registry.has_table("procrastinate_jobs"):
            return
    with schema_lock(fleet.engine):
        with fleet.registry() as registry:
            if not registry.has_table("procrastinate_jobs"):
                app.schema_manager.apply_schema()
                log.info("created the job engine's tables")


class Scheduler:
    """What any process of a deployment asks of the engine for a persona (synchronous; in a worker, from a job)."""

    def __init__(self, app: procrastinate.App, fleet: Fleet) -> None:
        self.app, self.fleet = app, fleet

    def _defer(
        self, task: str, name: str, kind: str, *, queueing_lock: str | None, delay_s: float = 0.0, **kwargs: Any
    ) -> int | None:
        """The job's id, or None when one with the same queueing lock already waits."""
        from procrastinate.exceptions import AlreadyEnqueued

        options: dict[str, Any] = {
            "queue": QUEUE,
            "lock": lock_of(name),
            "priority": PRIORITY[kind],
            "queueing_lock": queueing_lock,
        }
        if delay_s > 0:
            options["schedule_in"] = {"seconds": delay_s}
        try:
            job_id: int = self.app.configure_task(task, **options).defer(name=name, **kwargs)
            return job_id
        except AlreadyEnqueued:
            return None

    def wake(self, name: str) -> int | None:
        """A tick now (a human wrote, the persona was resumed): ahead of its scheduled tick."""
        return self._defer(TICK, name, "wake", queueing_lock=f"wake:{name}", reason="wake")

    def schedule_tick(self, name: str, delay_s: float) -> None:
        """The persona's next tick in `delay_s` seconds. One waits at most; one waiting for later is brought
        forward (a wake tick ran meanwhile, or the pause shrank)."""
        due = utcnow() + timedelta(seconds=max(0.0, delay_s))
        for _ in range(2):
            job_id = self._defer(TICK, name, "tick", queueing_lock=f"tick:{name}", delay_s=delay_s, reason="chain")
            if job_id is not None:
                with self.fleet.registry() as registry:
                    registry.set_next_tick(name, job_id, due)
                return
            with self.fleet.registry() as registry:
                entry = registry.get(name)
                waiting, at = (entry.next_tick_job, entry.next_tick_at) if entry else (None, None)
            if waiting is None or at is None or at <= due + timedelta(seconds=1):
                return  # the waiting tick comes soon enough
            if not self.app.job_manager.cancel_job_by_id(waiting):
                return  # it started meanwhile
        log.warning("persona %s: could not schedule its next tick", name)

    def dream(self, name: str) -> int | None:
        return self._defer(DREAM, name, "dream", queueing_lock=f"dream:{name}")

    def task_tick(self, name: str, task_id: int) -> int | None:
        return self._defer(TASK_TICK, name, "task", queueing_lock=f"task:{name}:{task_id}", task_id=task_id)

    def index(self, name: str) -> int | None:
        return self._defer(INDEX, name, "index", queueing_lock=None)

    def export(self, name: str, session_id: int) -> int | None:
        return self._defer(EXPORT, name, "export", queueing_lock=None, session_id=session_id)

    def cancel_waiting(self, name: str) -> int:
        """Cancel every job of the persona that has not started (it was paused or removed)."""
        cancelled = 0
        for job in self.app.job_manager.list_jobs(lock=lock_of(name), status="todo"):
            cancelled += bool(job.id is not None and self.app.job_manager.cancel_job_by_id(job.id))
        return cancelled

    def status(self, job_id: int) -> str:
        """`todo`, `doing`, `failed`, `cancelled`, … — or `succeeded` once gone (workers delete what succeeded)."""
        from procrastinate.exceptions import NoResult

        try:
            status: str = self.app.job_manager.get_job_status(job_id).value
            return status
        except NoResult:
            return "succeeded"

    def pending(self, name: str) -> list[dict[str, Any]]:
        """The persona's jobs that wait or run: task, status, when."""
        jobs = []
        for status in ("doing", "todo"):
            for job in self.app.job_manager.list_jobs(lock=lock_of(name), status=status):
                jobs.append(
                    {
                        "id": job.id,
                        "task": job.task_name,
                        "status": status,
                        "priority": job.priority,
                        "scheduled_at": job.scheduled_at.isoformat() if job.scheduled_at else None,
                    }
                )
        return jobs
