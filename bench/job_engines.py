"""The job engine of a deployment, measured: procrastinate (what graph/fleet/ runs on) against pgqueuer, the other
maintained job engine that needs nothing but PostgreSQL. Both run on one throwaway cluster (initdb/pg_ctl, the helper
of tests/integration), each scenario in a fresh database, with real worker processes of this file (`job_engines.py
worker …`) set up like `run.py worker`: the stalled-job recovery takes a job back 5 s after its worker's last
heartbeat (procrastinate: graph/fleet/worker.py's heartbeat and watchdog; pgqueuer: heartbeat_timeout), a 1 s poll
beside LISTEN/NOTIFY, at most 10 jobs at a time per process, and a job body that runs in a thread (a tick is
synchronous code). pgqueuer runs on asyncpg, the driver its own CLI picks; `--engines pgqueuer-psycopg` runs it on
psycopg, the project's driver. Every job appends `S`/`E` lines with the wall clock to its worker's records file, so
the figures are what the jobs saw:

1. latency — one idle worker; one job enqueued at a time, after a pause: p50/p95 from the enqueue call to the job
   starting (a NOTIFY wake; a poll would take up to 1 s);
2. throughput — 2000 no-op jobs enqueued in one batch to 1 and to 2 workers: jobs/s, the workers' and PostgreSQL's
   CPU per job;
3. per_key — the persona workload's serialisation: 100 keys × 10 jobs of 20 ms on 2 workers, never two of a key at
   once, against the same jobs without keys; then 5 keys × 10 jobs, fewer keys than free slots, where the handoff
   (a key's job ended → its next waiting job starts) is the lock's own cost — a note that came during a persona's
   tick waits that long after the tick. procrastinate: `lock=` (waiting jobs queue behind the running one).
   pgqueuer has no per-job lock: one entrypoint per key with `concurrency_limit=1`, every worker registering every
   key; its `dedupe_key` is measured too — it refuses a job whose key has one waiting or running, so a persona's
   next job could not wait behind its running one;
4. many_keys — a deployment of 10,000 personas: each has a job waiting, 1,000 of them due now (the rest in an hour):
   jobs/s and CPU per job with 2 workers;
5. recovery — 2 workers, a 3 s job of key 0 (then one more of key 0) and 2 jobs of 0.3 s for every other key; the
   worker running the 3 s job is killed with -9: seconds until that job starts again on the other worker, jobs lost
   and doubled (an in-flight job run again is the at-least-once both engines promise; a job whose body ran to its
   end twice is doubled), and same-key overlaps.

Every run also counts lost and doubled jobs and same-key overlaps.

Celery and Dramatiq are not measured: neither is a PostgreSQL job engine. Celery's brokers are RabbitMQ, Redis or SQS
(kombu's SQLAlchemy transport is experimental and polls) and it has no per-key lock; Dramatiq's brokers are RabbitMQ
and Redis (PostgreSQL only through third-party packages) and its concurrency limits keep their state in Redis or
Memcached. Either would add a server to run, back up and fail over beside the PostgreSQL a deployment already has.

    python bench/job_engines.py [--engines procrastinate pgqueuer pgqueuer-psycopg] [--scenarios latency …]
                                [--latency-jobs 40] [--jobs 2000] [--keys 100] [--per-key 10]
                                [--many-keys 10000] [--many-due 1000]

Prints JSON on stdout; progress on stderr. Run it with `nice -n 10` on a shared machine (about 5 minutes here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.fleet_parts import stop_all, wait_until  # noqa: E402

ENGINES = ("procrastinate", "pgqueuer", "pgqueuer-psycopg")
TASK = "bench.job"
FREE = "free"  # the key of a job without per-key serialisation
CONCURRENCY = 10  # jobs at a time per worker process
HANDOFF_KEYS = 5
READY_GUARD_S = 60  # hang guards for the bench's own waits, not timings
RUN_GUARD_S = 180


def say(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def key_name(index: int) -> str:
    return f"key_{index}"


# ---------------------------------------------------------------------------------------------------- worker process


def job_body(records_fd: int):
    """The job every engine runs, in a thread: its start and end, with the wall clock, appended to the records file
    (one write each: lines of concurrent jobs never interleave)."""
    pid = os.getpid()

    def body(n: int, key: str, sleep_s: float) -> None:
        os.write(records_fd, f"S {n} {key} {pid} {time.time():.6f}\n".encode())
        if sleep_s:
            time.sleep(sleep_s)
        os.write(records_fd, f"E {n} {key} {pid} {time.time():.6f}\n".encode())

    return body


async def procrastinate_worker(db: str, body, concurrency: int, ready) -> None:
    """A worker as `run.py worker` runs one: the project's app, heartbeat, poll and stalled-job watchdog."""
    from procrastinate.worker import Worker

    from graph.fleet import jobs
    from graph.fleet.worker import HEARTBEAT_S, POLL_S, STALLED_AFTER_S, recover_stalled

    app = jobs.make_app(db, worker=True, pool_size=concurrency + 4)

    @app.task(name=TASK, queue=jobs.QUEUE)
    def job(n: int, key: str, sleep_s: float) -> None:
        body(n, key, sleep_s)

    async with app.open_async():
        worker = Worker(
            app=app,
            queues=[jobs.QUEUE],
            concurrency=concurrency,
            update_heartbeat_interval=HEARTBEAT_S,
            stalled_worker_timeout=STALLED_AFTER_S,
            fetch_job_polling_interval=POLL_S,
            delete_jobs="successful",
            install_signal_handlers=True,
        )
        watchdog = asyncio.create_task(
            recover_stalled(app, stalled_after_s=STALLED_AFTER_S, own=lambda: worker.worker_id)
        )
        ready()
        try:
            await worker.run()
        finally:
            watchdog.cancel()


async def pgqueuer_connection(engine: str, db: str):
    """(connection, pgqueuer driver): asyncpg, what pgqueuer's own CLI uses when it is installed, or psycopg."""
    if engine == "pgqueuer":
        import asyncpg
        from pgqueuer import AsyncpgDriver

        connection = await asyncpg.connect(db)
        return connection, AsyncpgDriver(connection)
    import psycopg
    from pgqueuer import PsycopgDriver

    connection = await psycopg.AsyncConnection.connect(db, autocommit=True)
    return connection, PsycopgDriver(connection)


async def pgqueuer_worker(engine: str, db: str, body, concurrency: int, keys: int, ready) -> None:
    """pgqueuer's QueueManager with the same heartbeat staleness and poll; `keys` entrypoints of one job at a time."""
    from pgqueuer import Queries, QueueManager

    from graph.fleet.worker import POLL_S, STALLED_AFTER_S

    connection, driver = await pgqueuer_connection(engine, db)
    try:
        manager = QueueManager(Queries(driver))

        async def run(job) -> None:
            await asyncio.to_thread(body, **json.loads(job.payload))

        manager.entrypoint(FREE)(run)
        for index in range(keys):
            manager.entrypoint(key_name(index), concurrency_limit=1)(run)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, manager.shutdown.set)
        batch = max(1, concurrency // 2)  # pgqueuer wants max_concurrent_tasks ≥ 2 × batch_size
        ready()
        await manager.run(
            dequeue_timeout=timedelta(seconds=POLL_S),
            batch_size=batch,
            max_concurrent_tasks=2 * batch,
            heartbeat_timeout=timedelta(seconds=STALLED_AFTER_S),
        )
    finally:
        await connection.close()


def work(engine: str, db: str, records: Path, concurrency: int, keys: int) -> None:
    fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    body = job_body(fd)

    def ready() -> None:
        os.write(fd, f"R 0 - {os.getpid()} {time.time():.6f}\n".encode())

    if engine == "procrastinate":
        asyncio.run(procrastinate_worker(db, body, concurrency, ready))
    else:
        asyncio.run(pgqueuer_worker(engine, db, body, concurrency, keys, ready))


# ---------------------------------------------------------------------------------------------------- the bench side


@dataclass
class Record:
    kind: str
    n: int
    key: str
    pid: int
    at: float


@dataclass
class Execution:
    """What the records say about one job: every start and every end, by worker process."""

    starts: list[tuple[int, float]] = field(default_factory=list)
    ends: list[tuple[int, float]] = field(default_factory=list)
    key: str = FREE


def read_records(paths: list[Path]) -> list[Record]:
    records = []
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 5:
                    records.append(Record(parts[0], int(parts[1]), parts[2], int(parts[3]), float(parts[4])))
    return records


def executions(records: list[Record]) -> dict[int, Execution]:
    seen: dict[int, Execution] = {}
    for record in records:
        if record.kind in "SE":
            execution = seen.setdefault(record.n, Execution(key=record.key))
            (execution.starts if record.kind == "S" else execution.ends).append((record.pid, record.at))
    return seen


def overlaps(seen: dict[int, Execution], killed: dict[int, float] | None = None) -> int:
    """Pairs of runs of the same key that were under way at once. A run cut by a kill ends at the kill."""
    killed = killed or {}
    runs: dict[str, list[tuple[float, float]]] = {}
    for execution in seen.values():
        if execution.key == FREE:
            continue
        for pid, started in execution.starts:
            ended = next((at for end_pid, at in execution.ends if end_pid == pid and at >= started), None)
            if ended is None:
                ended = killed.get(pid, float("inf"))
            runs.setdefault(execution.key, []).append((started, ended))
    count = 0
    for spans in runs.values():
        spans.sort()
        latest_end = float("-inf")
        for started, ended in spans:
            count += started < latest_end
            latest_end = max(latest_end, ended)
    return count


def handoffs_ms(seen: dict[int, Execution], wanted: set[int]) -> list[float]:
    """For each job of a key that waited behind the one before it: milliseconds from that one's end to its start."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for n in wanted:
        execution = seen.get(n)
        if execution and execution.key != FREE and execution.starts and execution.ends:
            spans.setdefault(execution.key, []).append((execution.starts[-1][1], execution.ends[-1][1]))
    gaps = []
    for runs in spans.values():
        runs.sort()
        gaps += [(started - previous_end) * 1000 for (_, previous_end), (started, _) in zip(runs, runs[1:])]
    return gaps


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def proc_cpu_s(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process; (0, 0) once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class ServerCpu:
    """CPU seconds used by the PostgreSQL cluster: the postmaster, its live backends and those already gone."""

    def __init__(self, url: str):
        import psycopg

        with psycopg.connect(url, connect_timeout=10) as connection:  # read while the backend lives: it ends with it
            backend = connection.execute("SELECT pg_backend_pid()").fetchone()[0]
            self.postmaster = parent_of(backend)

    def seconds(self) -> float:
        own, reaped = proc_cpu_s(self.postmaster)
        total = own + reaped
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if parent_of(int(entry.name)) == self.postmaster:
                        total += proc_cpu_s(int(entry.name))[0]
                except (OSError, ValueError, IndexError):
                    continue
        return total


class Workers:
    """Worker processes of one engine on one database; each writes its own records file. Always stopped."""

    def __init__(self, engine: str, db: str, base: Path, *, keys: int = 0, concurrency: int = CONCURRENCY):
        self.engine, self.db, self.base, self.keys, self.concurrency = engine, db, base, keys, concurrency
        self.procs: list[subprocess.Popen] = []
        self.records: list[Path] = []
        self.killed: dict[int, float] = {}
        base.mkdir(parents=True, exist_ok=True)

    def start(self, count: int = 1) -> None:
        for _ in range(count):
            index = len(self.procs)
            records = self.base / f"{self.engine}-{index}.records"
            with open(self.base / f"{self.engine}-{index}.log", "w") as log:
                self.procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            __file__,
                            "worker",
                            self.engine,
                            self.db,
                            str(records),
                            str(self.concurrency),
                            str(self.keys),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            self.records.append(records)
        deadline = time.monotonic() + READY_GUARD_S
        while sum(r.kind == "R" for r in read_records(self.records)) < len(self.procs):
            for index, proc in enumerate(self.procs):
                if proc.poll() is not None and proc.pid not in self.killed:
                    raise RuntimeError(
                        f"{self.engine} worker {index} exited with {proc.returncode}: {self.log(index)[-2000:]}"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.engine} workers not ready within {READY_GUARD_S} s")
            time.sleep(0.05)
        time.sleep(1.0)  # the worker loop is up and listening

    def log(self, index: int) -> str:
        return (self.base / f"{self.engine}-{index}.log").read_text(errors="replace")

    def read(self) -> list[Record]:
        return read_records(self.records)

    def cpu_s(self) -> float:
        return sum(proc_cpu_s(proc.pid)[0] for proc in self.procs if proc.pid not in self.killed)

    def kill(self, pid: int) -> float:
        os.kill(pid, signal.SIGKILL)
        at = time.time()
        self.killed[pid] = at
        next(proc for proc in self.procs if proc.pid == pid).wait(timeout=30)
        return at

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        stop_all(self.procs, timeout=15)


class ProcrastinateClient:
    """What the rest of a deployment asks of an engine: install its tables, enqueue jobs (one, or a batch)."""

    def __init__(self, app):
        self.app = app

    async def install(self) -> None:
        await self.app.schema_manager.apply_schema_async()

    async def enqueue(self, jobs: list[tuple[int, str, float]], delay_s: float = 0.0) -> None:
        from procrastinate.jobs import Job

        from graph.fleet.jobs import QUEUE

        if len(jobs) == 1 and not delay_s:  # one job as Scheduler._defer defers it
            n, key, sleep_s = jobs[0]
            await self.app.configure_task(TASK, queue=QUEUE, lock=None if key == FREE else key).defer_async(
                n=n, key=key, sleep_s=sleep_s
            )
            return
        due = datetime.now(UTC) + timedelta(seconds=delay_s) if delay_s else None
        await self.app.job_manager.batch_defer_jobs_async(
            [
                Job(
                    queue=QUEUE,
                    lock=None if key == FREE else key,
                    queueing_lock=None,
                    task_name=TASK,
                    task_kwargs={"n": n, "key": key, "sleep_s": sleep_s},
                    scheduled_at=due,
                )
                for n, key, sleep_s in jobs
            ]
        )


class PgqueuerClient:
    """The same of pgqueuer, and its `dedupe_key`."""

    def __init__(self, queries):
        self.queries = queries

    async def install(self) -> None:
        await self.queries.install()

    @staticmethod
    def payloads(jobs: list[tuple[int, str, float]]) -> list[bytes]:
        return [json.dumps({"n": n, "key": key, "sleep_s": sleep_s}).encode() for n, key, sleep_s in jobs]

    async def enqueue(self, jobs: list[tuple[int, str, float]], delay_s: float = 0.0) -> None:
        await self.queries.enqueue(
            [key for _, key, _ in jobs], self.payloads(jobs), [0] * len(jobs), [timedelta(seconds=delay_s)] * len(jobs)
        )

    async def enqueue_deduplicated(self, jobs: list[tuple[int, str, float]]) -> int:
        """Enqueue with `dedupe_key` = the job's key; how many were accepted."""
        ids = await self.queries.enqueue(
            [key for _, key, _ in jobs],
            self.payloads(jobs),
            [0] * len(jobs),
            dedupe_key=[key for _, key, _ in jobs],
            on_conflict="skip",
        )
        return sum(job_id is not None for job_id in ids)


@asynccontextmanager
async def client(engine: str, db: str):
    if engine == "procrastinate":
        from graph.fleet import jobs

        app = jobs.make_app(db, worker=True)
        async with app.open_async():
            yield ProcrastinateClient(app)
    else:
        from pgqueuer import Queries

        connection, driver = await pgqueuer_connection(engine, db)
        try:
            yield PgqueuerClient(Queries(driver))
        finally:
            await connection.close()


class Cluster:
    """The throwaway cluster: a fresh database, with the engine's tables, for every scenario."""

    def __init__(self, url: str):
        self.url = url
        self.count = 0
        self.cpu = ServerCpu(url)

    async def database(self, engine: str) -> str:
        import psycopg

        self.count += 1
        name = f"bench_{engine.replace('-', '_')}_{self.count}"
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        url = self.url.rsplit("/", 1)[0] + "/" + name
        async with client(engine, url) as c:
            await c.install()
        return url


async def all_ended(workers: Workers, wanted: set[int], what: str) -> tuple[dict[int, Execution], bool]:
    """The executions once every wanted job has ended — or, after the guard, as they are (and True: timed out)."""

    def done():
        seen = executions(workers.read())
        return seen if all(seen.get(n) and seen[n].ends for n in wanted) else None

    try:
        return await asyncio.to_thread(wait_until, done, RUN_GUARD_S, what, 0.05), False
    except TimeoutError:
        say(f"  {what}: not within {RUN_GUARD_S} s; reporting what ended")
        return executions(workers.read()), True


def tally(seen: dict[int, Execution], wanted: set[int], killed: dict[int, float] | None = None) -> dict:
    return {
        "lost": sum(1 for n in wanted if not (seen.get(n) and seen[n].ends)),
        "doubled": sum(1 for n in wanted if seen.get(n) and len(seen[n].ends) > 1),
        "same_key_overlaps": overlaps(seen, killed),
    }


async def latency(cluster: Cluster, engine: str, base: Path, count: int) -> dict:
    say(f"  {engine} wake latency: {count} jobs, one at a time, to an idle worker")
    db = await cluster.database(engine)
    waits = []
    async with client(engine, db) as c:
        with Workers(engine, db, base / "latency") as workers:
            workers.start(1)
            for n in range(count):
                enqueued = time.time()
                await c.enqueue([(n, FREE, 0.0)])
                started = await asyncio.to_thread(
                    wait_until,
                    lambda: next((r.at for r in workers.read() if r.kind == "S" and r.n == n), None),  # noqa: B023 - called within this iteration
                    30,
                    f"job {n} starts",
                    0.01,
                )
                waits.append((started - enqueued) * 1000)
                await asyncio.sleep(random.uniform(0.1, 0.3))  # idle again: the next job is a wake
    result = {"jobs": count, "p50_ms": pct(waits, 0.5), "p95_ms": pct(waits, 0.95), "max_ms": pct(waits, 1.0)}
    say(f"    {result}")
    return result


async def run_batch(
    c,
    workers: Workers,
    cluster: Cluster,
    name: str,
    jobs: list[tuple[int, str, float]],
    *,
    waiting: list[tuple[int, str, float]] = (),
) -> dict:
    """On running workers: the jobs enqueued in one batch, until every one has ended: jobs/s and CPU per job.
    `waiting`: jobs enqueued right after them for an hour later (the next ticks of the personas that are not due:
    newer than the due ones, as in a deployment where each tick defers the next)."""
    running = len(workers.procs) - len(workers.killed)
    say(
        f"  {workers.engine} {name}: {len(jobs)} jobs on {running} worker(s)"
        + (f", {len(waiting)} more waiting for later" if waiting else "")
    )
    cpu_workers, cpu_server = workers.cpu_s(), cluster.cpu.seconds()
    began = time.time()
    await c.enqueue(jobs)
    if waiting:
        await c.enqueue(list(waiting), delay_s=3600)
    wanted = {n for n, _, _ in jobs}
    seen, timed_out = await all_ended(workers, wanted, f"{workers.engine} {name}: every job ends")
    cpu_workers, cpu_server = workers.cpu_s() - cpu_workers, cluster.cpu.seconds() - cpu_server
    ended = [n for n in wanted if seen.get(n) and seen[n].ends]
    elapsed = (max(at for n in ended for _, at in seen[n].ends) if ended else time.time()) - began
    result = {
        "workers": running,
        "jobs": len(jobs),
        "seconds": round(elapsed, 2),
        "jobs_per_s": round(len(ended) / elapsed, 1),
        "worker_cpu_ms_per_job": round(cpu_workers * 1000 / max(1, len(ended)), 2),
        "postgres_cpu_ms_per_job": round(cpu_server * 1000 / max(1, len(ended)), 2),
        **tally(seen, wanted),
    }
    if gaps := handoffs_ms(seen, wanted):
        result["same_key_handoff_ms"] = {"p50": pct(gaps, 0.5), "p95": pct(gaps, 0.95), "max": pct(gaps, 1.0)}
    if timed_out:
        result["timed_out_after_s"] = RUN_GUARD_S
    say(f"    {result}")
    return result


async def throughput(cluster: Cluster, engine: str, base: Path, count: int) -> list[dict]:
    """No-op jobs on one worker, then on two (a second one joins)."""
    db = await cluster.database(engine)
    results = []
    async with client(engine, db) as c:
        with Workers(engine, db, base / "throughput") as workers:
            for round_ in range(2):
                workers.start(1)
                results.append(
                    await run_batch(
                        c,
                        workers,
                        cluster,
                        f"no-op, {round_ + 1} worker(s)",
                        [(round_ * count + i, FREE, 0.0) for i in range(count)],
                    )
                )
    return results


async def per_key(cluster: Cluster, engine: str, base: Path, keys: int, per_key_count: int, job_s: float) -> dict:
    """The same jobs without keys, then with, on the same two workers (pgqueuer's register every key's entrypoint,
    as a deployment's would)."""
    db = await cluster.database(engine)
    count = keys * per_key_count
    async with client(engine, db) as c:
        with Workers(engine, db, base / "per_key", keys=keys) as workers:
            workers.start(2)
            free = await run_batch(c, workers, cluster, "without keys", [(i, FREE, job_s) for i in range(count)])
            keyed = await run_batch(
                c, workers, cluster, "with keys", [(count + i, key_name(i % keys), job_s) for i in range(count)]
            )
            few = min(HANDOFF_KEYS, keys)  # fewer keys than free slots: a waiting job waits for its key alone
            handoff = await run_batch(
                c,
                workers,
                cluster,
                f"{few} keys, free slots",
                [(2 * count + i, key_name(i % few), job_s) for i in range(few * per_key_count)],
            )
    how = (
        "lock=<key> on each job: waiting jobs queue behind the running one"
        if engine == "procrastinate"
        else "one entrypoint per key with concurrency_limit=1, every key registered in every worker"
    )
    return {
        "how": how,
        "keys": keys,
        "jobs_per_key": per_key_count,
        "job_s": job_s,
        "without_keys": free,
        "with_keys": keyed,
        "keyed_vs_free_throughput": round(keyed["jobs_per_s"] / free["jobs_per_s"], 2),
        "few_keys_free_slots": {"keys": few, **handoff},
    }


async def many_keys(cluster: Cluster, engine: str, base: Path, keys: int, due: int) -> dict:
    db = await cluster.database(engine)
    async with client(engine, db) as c:
        with Workers(engine, db, base / "many_keys", keys=keys) as workers:
            workers.start(2)
            result = await run_batch(
                c,
                workers,
                cluster,
                f"{keys} keys",
                [(i, key_name(i), 0.0) for i in range(due)],
                waiting=[(i, key_name(i), 0.0) for i in range(due, keys)],
            )
    return {"keys": keys, **result}


async def recovery(cluster: Cluster, engine: str, base: Path, keys: int) -> dict:
    from graph.fleet.worker import STALLED_AFTER_S

    say(f"  {engine} recovery: 2 workers, the one running a 3 s job killed with -9")
    db = await cluster.database(engine)
    victim = 0
    jobs = [(victim, key_name(0), 3.0), (1, key_name(0), 0.02)]  # the victim, and the next job of its key
    jobs += [(2 + i, key_name(1 + i % (keys - 1)), 0.3) for i in range(2 * (keys - 1))]
    async with client(engine, db) as c:
        with Workers(engine, db, base / "recovery", keys=keys) as workers:
            workers.start(2)
            await c.enqueue(jobs)
            holder = await asyncio.to_thread(
                wait_until,
                lambda: next((r.pid for r in workers.read() if r.kind == "S" and r.n == victim), None),
                30,
                "the victim starts",
                0.01,
            )
            await asyncio.sleep(0.5)  # its worker is busy with other jobs too
            killed_at = workers.kill(holder)
            say(f"    killed worker {holder}, which ran the victim")
            seen, timed_out = await all_ended(workers, {n for n, _, _ in jobs}, f"{engine}: every job ends")
    cut = [
        n
        for n, e in seen.items()
        if any(pid == holder for pid, _ in e.starts) and not any(pid == holder for pid, _ in e.ends)
    ]
    again = [at for pid, at in seen[victim].starts if pid != holder]
    finished = [at for pid, at in seen[victim].ends if pid != holder]
    result = {
        "workers": 2,
        "jobs": len(jobs),
        "stalled_after_s": STALLED_AFTER_S,
        "victim_restarted_s": round(min(again) - killed_at, 2) if again else None,
        "victim_finished_s": round(max(finished) - killed_at, 2) if finished else None,
        "cut_by_the_kill": len(cut),
        "cut_and_run_again": sum(1 for n in cut if any(pid != holder for pid, _ in seen[n].starts)),
        **tally(seen, {n for n, _, _ in jobs}, workers.killed),
    }
    if timed_out:
        result["timed_out_after_s"] = RUN_GUARD_S
    say(f"    {result}")
    return result


async def dedupe_key(cluster: Cluster, keys: int, per_key: int) -> dict:
    """pgqueuer's other way to hold a key: how many of `keys × per_key` jobs its `dedupe_key` accepts."""
    db = await cluster.database("pgqueuer")
    jobs = [(i, key_name(i % keys), 0.0) for i in range(keys * per_key)]
    async with client("pgqueuer", db) as c:
        accepted = await c.enqueue_deduplicated(jobs)
    result = {"enqueued": len(jobs), "accepted": accepted, "refused": len(jobs) - accepted}
    say(f"  pgqueuer dedupe_key: {result}")
    return result


async def measure_engine(cluster: Cluster, engine: str, args, base: Path) -> dict:
    result: dict = {"version": version(engine.split("-")[0])}
    if engine.startswith("pgqueuer"):
        result["driver"] = "asyncpg" if engine == "pgqueuer" else "psycopg"
    if "latency" in args.scenarios:
        result["wake_latency"] = await latency(cluster, engine, base, args.latency_jobs)
    if "throughput" in args.scenarios:
        result["throughput_noop"] = await throughput(cluster, engine, base, args.jobs)
    if "per_key" in args.scenarios:
        result["per_key"] = await per_key(cluster, engine, base, args.keys, args.per_key, args.job_s)
    if "many_keys" in args.scenarios:
        result["many_keys"] = await many_keys(cluster, engine, base, args.many_keys, args.many_due)
    if "recovery" in args.scenarios:
        result["recovery_kill9"] = await recovery(cluster, engine, base, args.keys)
    return result


async def measure(url: str, args, base: Path) -> dict:
    cluster = Cluster(url)
    results: dict = {"engines": {}}
    for engine in args.engines:
        say(f"{engine}:")
        results["engines"][engine] = await measure_engine(cluster, engine, args, base / engine)
    if "per_key" in args.scenarios and any(engine.startswith("pgqueuer") for engine in args.engines):
        results["pgqueuer_dedupe_key"] = await dedupe_key(cluster, args.keys, args.per_key)
    return results


SCENARIOS = ("latency", "throughput", "per_key", "many_keys", "recovery")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES[:2]))
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--latency-jobs", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs per throughput run")
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--per-key", type=int, default=10)
    parser.add_argument("--job-s", type=float, default=0.02, help="a job's length in the per-key runs")
    parser.add_argument("--many-keys", type=int, default=10_000)
    parser.add_argument("--many-due", type=int, default=1000)
    args = parser.parse_args()
    if args.keys < 2 or args.many_due > args.many_keys:
        parser.error("--keys must be at least 2, --many-due at most --many-keys")

    from tests.integration.servers import postgres_server

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="anima-engines-") as tmp, postgres_server() as url:
        say(f"PostgreSQL at {url}")
        results = asyncio.run(measure(url, args, Path(tmp)))
    output = {
        **results,
        "concurrency_per_worker": CONCURRENCY,
        "cores": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "seconds": round(time.monotonic() - started, 1),
        "not_measured": {
            "celery": "no PostgreSQL broker (RabbitMQ, Redis, SQS; kombu's SQLAlchemy transport "
            "is experimental and polls) and no per-key lock",
            "dramatiq": "its brokers are RabbitMQ and Redis (PostgreSQL only through third-party "
            "packages) and its concurrency limits need Redis or Memcached",
        },
    }
    print(json.dumps(output, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":  # a worker process of the bench (Workers.start)
        import logging

        _, _, engine, db, records, concurrency, keys = sys.argv
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        work(engine, db, Path(records), int(concurrency), int(keys))
    else:
        main()
