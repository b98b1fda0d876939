"""`run.py worker`: one process running the deployment's jobs (graph/fleet/jobs.py) — any persona's, `concurrency` at a
time, never two of the same persona at once (the engine's lock on `persona:<name>`, and the fence beside it).

Failover. Every worker sends the engine a heartbeat every `heartbeat_s`. Each worker also watches the others: a job
left `doing` by a worker whose heartbeat is older than `stalled_after_s` (killed, its machine gone) is handed back
to the queue with the engine's `retry_job` (`get_stalled_jobs` finds it), and the first free worker runs it. The
persona resumes from its PostgreSQL checkpoint: the model's answer kept with the tick is reused, commands run once
by id, a finished tick never runs again. A stalled job whose successor already waits (it was killed after its tick
committed and chained the next) is closed as failed instead: its work is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from graph.agent import settle_heap
from graph.fleet import jobs
from graph.fleet.runtime import WorkerRuntime, worker_token
from llm import Provider
from memory.fleet import Fleet
from persona.settings import Overrides

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger(__name__)
T = TypeVar("T")
HEARTBEAT_S = 1.0
STALLED_AFTER_S = 5.0
WATCH_EVERY_S = 1.0
FAILED_TICK_RETRY_S = 30.0  # a tick job that raised (a step's failure is quarantined inside the tick, not here)
POLL_S = 1.0  # how soon a scheduled tick (a persona's pause) is noticed; deferred jobs arrive by NOTIFY at once


def register_tasks(app: procrastinate.App, runtime: WorkerRuntime, scheduler: jobs.Scheduler) -> None:
    """The job bodies: each runs in a thread of the worker, holding its persona's fence."""

    def fenced(name: str, work: Callable[[], T]) -> T:
        with runtime.fleet.fence(name):
            return work()

    @app.task(name=jobs.TICK, queue=jobs.QUEUE)
    def tick(name: str, reason: str = "chain") -> None:
        try:
            delay = fenced(name, lambda: runtime.tick(name))
        except Exception:  # noqa: BLE001 - the database or Chroma failed under the tick: the chain goes on
            log.exception("persona %s: its tick job failed; trying again in %.0f s", name, FAILED_TICK_RETRY_S)
            delay = FAILED_TICK_RETRY_S
        if delay is not None:
            scheduler.schedule_tick(name, delay)

    @app.task(name=jobs.DREAM, queue=jobs.QUEUE)
    def dream(name: str) -> None:
        fenced(name, lambda: runtime.dream(name))

    @app.task(name=jobs.TASK_TICK, queue=jobs.QUEUE)
    def task_tick(name: str, task_id: int) -> None:
        fenced(name, lambda: runtime.task_tick(name, task_id))

    @app.task(name=jobs.INDEX, queue=jobs.QUEUE)
    def index(name: str) -> int:
        return fenced(name, lambda: runtime.index(name))

    @app.task(name=jobs.EXPORT, queue=jobs.QUEUE)
    def export(name: str, session_id: int) -> str:
        return fenced(name, lambda: runtime.export(name, session_id))


async def recover_stalled(
    app: procrastinate.App,
    *,
    every_s: float = WATCH_EVERY_S,
    stalled_after_s: float = STALLED_AFTER_S,
    own: Callable[[], int | None] = lambda: None,
) -> None:
    """The watchdog: jobs of workers whose heartbeat stopped go back to the queue (the engine's own recovery).
    `own()`: this worker's id — its own jobs are never its business (while it stops, its heartbeat stops first)."""
    from procrastinate import exceptions
    from procrastinate.jobs import Status

    while True:
        await asyncio.sleep(every_s)
        try:
            stalled = await app.job_manager.get_stalled_jobs(queue=jobs.QUEUE, seconds_since_heartbeat=stalled_after_s)
        except Exception:  # noqa: BLE001 - the database may be restarting; look again
            log.warning("watchdog: could not look for stalled jobs", exc_info=True)
            continue
        for job in stalled:
            if job.worker_id is not None and job.worker_id == own():
                continue
            try:
                await app.job_manager.retry_job(job)
                log.warning(
                    "job %s (%s %s) of a stopped worker goes back to the queue",
                    job.id,
                    job.task_name,
                    job.task_kwargs.get("name"),
                )
            except exceptions.UniqueViolation:  # its successor already waits: the work is done
                await app.job_manager.finish_job(job, Status.FAILED, delete_job=False)
                log.warning("job %s of a stopped worker closed: the persona's next job already waits", job.id)
            except exceptions.ConnectorException:  # another worker took it first
                log.debug("job %s was recovered by another worker", job.id, exc_info=True)


def resume_active(fleet: Fleet, scheduler: jobs.Scheduler) -> int:
    """Every active persona has a tick waiting (a new deployment, or one whose chain was cut): at most one each."""
    with fleet.registry() as registry:
        names = [entry.name for entry in registry.list(state="active")]
    for name in names:
        scheduler.schedule_tick(name, 0.0)
    return len(names)


def run_worker(
    url: str,
    overrides: Overrides,
    *,
    concurrency: int = 1,
    keep_open: int = 256,
    heartbeat_s: float = HEARTBEAT_S,
    stalled_after_s: float = STALLED_AFTER_S,
    poll_s: float = POLL_S,
    name: str | None = None,
    providers: dict[str, Provider] | None = None,
    entries: list[dict[str, Any]] | None = None,
) -> None:
    """Run jobs until SIGINT/SIGTERM (the running jobs finish first; a second signal stops at once). SIGUSR1 prints
    every thread's stack (what a worker is doing)."""
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    from graph.telemetry import configure_tracing

    configure_tracing("anima-worker")  # only with OTEL_EXPORTER_OTLP_ENDPOINT set
    # a running job holds its fence's connection, its kept sessions' (one for its units, one for its reads; a unit
    # inside another, or a read inside a unit, one more: at most five) and, a moment, the registry's
    fleet = Fleet.open(url, pool_size=4 * concurrency + 2)
    deferrer = jobs.make_app(fleet.libpq_url())
    app = jobs.make_app(fleet.libpq_url(), worker=True, pool_size=concurrency + 4)
    runtime = None
    try:
        # the jobs defer the next ones (a tick its successor) from their threads: through a synchronous pool of its
        # own, not the worker's asynchronous one (a hop to the event loop and back: 1.8 ms of CPU a defer, 0.6-0.8)
        with deferrer.open():
            scheduler = jobs.Scheduler(deferrer, fleet)
            jobs.ensure_job_schema(deferrer, fleet)
            log.info("worker: %d active persona(s)", resume_active(fleet, scheduler))
            runtime = WorkerRuntime(
                fleet, overrides, scheduler=scheduler, keep_open=keep_open, providers=providers, entries=entries
            )
            settle_heap()  # started: the modules, the embedding model and the pools live as long as the worker
            asyncio.run(
                _work(
                    app,
                    runtime,
                    scheduler,
                    concurrency=concurrency,
                    heartbeat_s=heartbeat_s,
                    stalled_after_s=stalled_after_s,
                    poll_s=poll_s,
                    name=name or worker_token(),
                )
            )
    finally:
        if runtime is not None:
            runtime.close()
        fleet.close()


async def _work(
    app: procrastinate.App,
    runtime: WorkerRuntime,
    scheduler: jobs.Scheduler,
    *,
    concurrency: int,
    heartbeat_s: float,
    stalled_after_s: float,
    poll_s: float,
    name: str,
) -> None:
    from procrastinate.worker import Worker

    async with app.open_async():
        register_tasks(app, runtime, scheduler)
        worker = Worker(
            app=app,
            queues=[jobs.QUEUE],
            concurrency=concurrency,
            name=name,
            update_heartbeat_interval=heartbeat_s,
            stalled_worker_timeout=stalled_after_s,
            fetch_job_polling_interval=poll_s,
            delete_jobs="successful",
            install_signal_handlers=True,
        )
        watchdog = asyncio.create_task(
            recover_stalled(app, stalled_after_s=stalled_after_s, own=lambda: worker.worker_id)
        )
        try:
            await worker.run()
        finally:
            watchdog.cancel()
