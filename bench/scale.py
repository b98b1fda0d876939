"""Many personas on real parts: a PostgreSQL cluster (initdb/pg_ctl), a `chroma run` server, an instant scripted
model server and `run.py worker` processes. Prints JSON:

- per worker count (1, 2, 4 by default; one job at a time each): aggregate ticks/s over a measured window after a
  warm-up (every persona has ticked once — its first job opens it in the worker, about half a second — and then
  `--warmup` seconds more: the window measures warm ticks; `warm_after_s` says how long the opening took), p50/p95
  of a tick's own time (its row's start to finish, minus the model's time: the orchestration, SQL, embedding and
  Chroma cost of a tick) and of a tick job's whole time (tick plus the job engine and the chain), and the workers'
  own CPU per tick (`worker_cpu_ms_per_tick`: user + system time of the worker processes over the window), and the
  statements and transactions PostgreSQL ran per tick over the window (`statements_per_tick`: pg_stat_statements'
  calls, BEGIN/COMMIT/SET included; `transactions_per_tick`: pg_stat_database's commits and rollbacks — every client
  of the database, the job engine's included);
- idle (`--idle N`): N personas alone with nothing to think about (`cycle.thinking: eventful`) on one worker: no
  tick job runs for them, only a small job per quiet pause (managers/thinking.py); the worker's CPU over the window,
  the quiet looks it took, CPU per look (the worker's fixed background included), the CPU per idle persona-hour at
  that ceiling, and what the looks cost per idle persona-hour at the default ceiling (1800 s: two looks an hour) —
  measured with a short ceiling (`--idle-ceiling`, so the window sees the quiet steady state); goal ≤ 1 CPU-second
  per idle persona-hour;
- takeover: two workers, one killed with -9 in the middle of a tick — seconds until the persona whose tick it was
  finishes its next tick on the other, and how many human notes were lost and commands executed twice (0 and 0).

    python bench/scale.py [--personas 100] [--workers 1 2 4] [--warmup 20] [--window 30] [--no-takeover]
                          [--idle 20 --idle-only --idle-window 60 --idle-ceiling 8]

Run it with `nice -n 10` on a shared machine; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import func, select  # noqa: E402

from graph.fleet.personas import Deployment  # noqa: E402
from memory.fleet import Fleet  # noqa: E402
from memory.models import DiaryEntry, ExecutedCommand, Note, Tick  # noqa: E402
from tests.integration.fleet_parts import THOUGHT, Workers, chroma_server, wait_until, write_persona  # noqa: E402
from tests.integration.servers import postgres_server, scripted_llm_server  # noqa: E402


def say(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def total_ticks(fleet: Fleet) -> int:
    with fleet.registry() as registry:
        return sum(entry.ticks for entry in registry.list())


def ticks_of(fleet: Fleet) -> dict[str, int]:
    with fleet.registry() as registry:
        return {entry.name: entry.ticks for entry in registry.list()}


def tick_costs(fleet: Fleet, names: list[str], since: datetime, until: datetime) -> list[float]:
    """Milliseconds of each tick finished in the window, the model's own time taken out."""
    costs = []
    for name in names:
        database = fleet.database(name)
        try:
            with database.session() as session:
                for tick in session.scalars(select(Tick).where(Tick.finished_at >= since, Tick.finished_at <= until)):
                    costs.append((tick.finished_at - tick.started_at).total_seconds() * 1000 - (tick.llm_ms or 0.0))
        finally:
            database.close()
    return costs


def job_times(log: str) -> list[float]:
    return [
        float(s) * 1000
        for s in re.findall(r"Job anima\.tick\[\d+\]\([^)]*\) ended with status: Success, lasted ([\d.]+) s", log)
    ]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def cpu_s(pid: int) -> float:
    """CPU seconds a process has used (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def server_counts(fleet: Fleet) -> tuple[int, int]:
    """(statements, transactions) PostgreSQL has run in the deployment's database so far."""
    with fleet.engine.connect() as connection:
        statements = connection.exec_driver_sql(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
            "current_database())"
        ).scalar()
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        transactions = connection.exec_driver_sql(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).scalar()
    return int(statements or 0), int(transactions or 0)


def measure(fleet, names, pg_url, chroma_url, llm_url, base: Path, workers: int, warmup: float, window: float) -> dict:
    cache = base / f"cache-{workers}"
    cache.mkdir()
    with Workers(pg_url, chroma_url, llm_url, cache) as procs:
        for _ in range(workers):
            procs.start()
        before, started = ticks_of(fleet), time.monotonic()
        say(f"{workers} worker(s): until every persona has ticked once, then {warmup:.0f} s more")
        wait_until(
            lambda: all(n > before.get(name, 0) for name, n in ticks_of(fleet).items()),
            60 + 5 * len(names),
            "every persona ticked once",
            every=1.0,
        )
        warm_after = time.monotonic() - started
        time.sleep(warmup)
        start_ticks, start_at = total_ticks(fleet), datetime.now(UTC)
        logs_before = [len(procs.log(i)) for i in range(workers)]
        cpu_before = sum(cpu_s(p.pid) for p in procs.procs)
        counts_before = server_counts(fleet)
        time.sleep(window)
        end_ticks, end_at = total_ticks(fleet), datetime.now(UTC)
        cpu_used = sum(cpu_s(p.pid) for p in procs.procs) - cpu_before
        # both ends alike: PostgreSQL publishes a backend's transaction counts up to a second late
        statements, transactions = (after - before for after, before in zip(server_counts(fleet), counts_before))
        memory = [rss_mb(p.pid) for p in procs.procs]
        jobs = [t for i in range(workers) for t in job_times(procs.log(i)[logs_before[i] :])]
    costs = tick_costs(fleet, names, start_at, end_at)
    result = {
        "workers": workers,
        "warm_after_s": round(warm_after, 1),
        "ticks": end_ticks - start_ticks,
        "window_s": window,
        "ticks_per_s": round((end_ticks - start_ticks) / window, 2),
        "tick_overhead_ms": {"p50": pct(costs, 0.5), "p95": pct(costs, 0.95), "n": len(costs)},
        "tick_job_ms": {"p50": pct(jobs, 0.5), "p95": pct(jobs, 0.95), "n": len(jobs)},
        "worker_cpu_ms_per_tick": round(cpu_used * 1000 / max(1, end_ticks - start_ticks), 1),
        "statements_per_tick": round(statements / max(1, end_ticks - start_ticks), 1),
        "transactions_per_tick": round(transactions / max(1, end_ticks - start_ticks), 1),
        "worker_rss_mb": memory,
        "load_average": round(os.getloadavg()[0], 2),
    }
    say(json.dumps(result))
    return result


def quiet_looks(fleet: Fleet, names: list[str]) -> int:
    from memory.models import ProcessLog

    total = 0
    for name in names:
        with fleet.database(name).reading() as repos:
            total += (
                repos.session.scalar(select(func.count(ProcessLog.id)).where(ProcessLog.name == "cycle.quiet")) or 0
            )
    return total


def measure_idle(
    fleet, names, pg_url, chroma_url, llm_url, base: Path, warmup: float, window: float, ceiling: float
) -> dict:
    """Idle personas on one worker: its CPU over a window in the quiet steady state."""
    cache = base / "cache-idle"
    cache.mkdir()
    with Workers(pg_url, chroma_url, llm_url, cache) as procs:
        procs.start()
        before = ticks_of(fleet)
        say(f"idle: {len(names)} personas until each has thought once, then {warmup:.0f} s of quiet")

        def each_thought() -> bool:
            now = ticks_of(fleet)
            return all(now.get(name, 0) > before.get(name, 0) for name in names)

        wait_until(each_thought, 60 + 5 * len(names), "every persona thought once", every=1.0)
        time.sleep(warmup)
        ticks_before, looks_before = total_ticks(fleet), quiet_looks(fleet, names)
        cpu_before = sum(cpu_s(p.pid) for p in procs.procs)
        time.sleep(window)
        cpu_used = sum(cpu_s(p.pid) for p in procs.procs) - cpu_before
        ticks, looks = total_ticks(fleet) - ticks_before, quiet_looks(fleet, names) - looks_before
    persona_hours = len(names) * window / 3600
    # per look, the worker's whole CPU over the window: its fixed background (heartbeat, the job engine's polling)
    # included, so scaling it to the default ceiling's two looks an hour is an upper bound only while the looks
    # dominate; the fixed part, shared by every persona the worker serves, is the rest
    per_look = cpu_used / max(1, looks)
    looks_per_hour_default = 3600 / 1800
    result = {
        "personas": len(names),
        "window_s": window,
        "ceiling_s": ceiling,
        "ticks": ticks,
        "quiet_looks": looks,
        "worker_cpu_s": round(cpu_used, 3),
        "cpu_ms_per_look": round(per_look * 1000, 1),
        "cpu_s_per_idle_persona_hour_at_this_ceiling": round(cpu_used / persona_hours, 2),
        "cpu_s_per_idle_persona_hour_in_looks_at_default_ceiling": round(per_look * looks_per_hour_default, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }
    say(json.dumps(result))
    return result


def in_flight(log: str) -> tuple[int, str] | None:
    started = {
        int(m.group(1)): m.group(2) for m in re.finditer(r"Starting job anima\.tick\[(\d+)\]\(name='(\w+)'", log)
    }
    ended = {int(m) for m in re.findall(r"Job anima\.\w+\[(\d+)\]\([^)]*\) ended", log)}
    waiting = sorted(set(started) - ended)
    return (waiting[-1], started[waiting[-1]]) if waiting else None


def takeover(fleet, deployment, names, pg_url, chroma_url, llm_url, base: Path, warmup: float) -> dict:
    cache = base / "cache-takeover"
    cache.mkdir()
    with Workers(pg_url, chroma_url, llm_url, cache) as procs:
        procs.start()
        procs.start()
        time.sleep(warmup)
        for name in names:  # a note to every persona, then a kill: none may be lost
            database = fleet.database(name)
            with database.unit() as repos:
                repos.notes.add(f"a note for {name}", source="user")
            database.close()
            deployment.wake(name)
        victim = wait_until(lambda: in_flight(procs.log(0)), 60, "worker 0 mid-tick", every=0.02)
        before = ticks_of(fleet)[victim[1]]
        procs.kill(0)
        killed = time.monotonic()
        say(f"killed worker 0 during job {victim[0]} of {victim[1]}")
        wait_until(lambda: ticks_of(fleet)[victim[1]] > before, 120, "the victim ticks again", every=0.05)
        seconds = time.monotonic() - killed

        def unread() -> int:
            count = 0
            for name in names:
                database = fleet.database(name)
                with database.session() as session:
                    count += (
                        session.scalar(
                            select(func.count()).select_from(Note).where(Note.source == "user", Note.read.is_(False))
                        )
                        or 0
                    )
                database.close()
            return count

        try:
            wait_until(lambda: unread() == 0, 180, "every note read", every=1.0)
        except TimeoutError:
            pass
        lost = unread()
    doubled = 0
    for name in names:
        database = fleet.database(name)
        with database.session() as session:
            diary = list(session.scalars(select(DiaryEntry.text)).all())
            keys = list(session.scalars(select(ExecutedCommand.cmd_key).where(ExecutedCommand.status == "executed")))
        database.close()
        doubled += (len(diary) - len(set(diary))) + (len(keys) - len(set(keys)))
    return {
        "workers": 2,
        "killed_job": victim[0],
        "persona": victim[1],
        "takeover_s": round(seconds, 2),
        "lost_notes": lost,
        "doubled_commands": doubled,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--personas", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--no-takeover", action="store_true", help="skip the kill -9 takeover measurement")
    parser.add_argument("--idle", type=int, default=20, help="idle personas measured after the runs (0: none)")
    parser.add_argument("--idle-only", action="store_true", help="measure only the idle personas")
    parser.add_argument("--idle-window", type=float, default=60.0)
    parser.add_argument("--idle-ceiling", type=float, default=8.0, help="the idle personas' quiet ceiling (s)")
    args = parser.parse_args()
    names = [f"b{i:03d}" for i in range(args.personas)]
    base = Path(tempfile.mkdtemp(prefix="anima-scale-"))
    out: dict = {
        "personas": args.personas,
        "machine_cores": os.cpu_count(),
        "llm": "scripted server, instant",
        "runs": [],
    }
    with (
        postgres_server({"shared_preload_libraries": "pg_stat_statements"}) as pg_url,
        chroma_server() as chroma_url,
        scripted_llm_server() as llm,
    ):
        llm.script(default={"do": "stream", "text": THOUGHT}, record=False)
        persona = write_persona(base / "persona", pause_s=0.0)
        deployment = Deployment.open(pg_url)
        fleet = deployment.fleet
        with fleet.engine.begin() as connection:
            connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if not args.idle_only:
            started = time.monotonic()
            for number, name in enumerate(names, 1):
                deployment.add(name, persona)
                if number % 20 == 0:
                    say(f"added {number}/{len(names)} personas")
            out["add_persona_ms"] = round((time.monotonic() - started) * 1000 / len(names), 1)
            for workers in args.workers:
                out["runs"].append(
                    measure(fleet, names, pg_url, chroma_url, llm.url, base, workers, args.warmup, args.window)
                )
            if not args.no_takeover:
                out["takeover"] = takeover(fleet, deployment, names, pg_url, chroma_url, llm.url, base, args.warmup)
        if args.idle:
            idle = [f"i{i:03d}" for i in range(args.idle)]
            quiet = write_persona(
                base / "idle-persona", pause_s=0.0, thinking="eventful", quiet_ceiling_s=args.idle_ceiling
            )
            for name in idle:
                deployment.add(name, quiet)
            for name in names if not args.idle_only else []:
                deployment.pause(name)
            out["idle"] = measure_idle(
                fleet, idle, pg_url, chroma_url, llm.url, base, args.warmup, args.idle_window, args.idle_ceiling
            )
        deployment.close()
    __import__("shutil").rmtree(base, ignore_errors=True)
    one = next((r for r in out["runs"] if r["workers"] == 1), None)  # none with --idle-only
    for run in out["runs"]:
        run["speedup"] = round(run["ticks_per_s"] / one["ticks_per_s"], 2) if one and one["ticks_per_s"] else None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
