"""A fleet worker's tick jobs in one process, measured (JSON): the job's body as `run.py worker` runs it (the
persona's fence, `WorkerRuntime.tick`, the next tick deferred) on a real PostgreSQL cluster, a `chroma run` server and
an instant scripted model, without the job engine's fetching around it — what a warm persona's job costs a worker:

- `cpu_ms_per_job`: the process's CPU time per job (every thread: LangGraph runs the steps in its own);
- `statements_per_job`: statements sent through psycopg (SQLAlchemy's, the checkpointer's, the job engine's defers);
- `rss_mb`: the process before any persona was open but one, and `per_open_persona_mb` for each one more it keeps open.

    python bench/worker_jobs.py [--personas 20] [--rounds 5] [--profile out.prof]

`--profile`: cProfile on every thread the jobs start, timed in thread CPU time (`python -m pstats out.prof`).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from graph.fleet import jobs  # noqa: E402
from graph.fleet.personas import Deployment  # noqa: E402
from graph.fleet.runtime import WorkerRuntime  # noqa: E402
from memory.fleet import Fleet  # noqa: E402
from persona.settings import Overrides  # noqa: E402
from tests.integration.fleet_parts import THOUGHT, chroma_server, write_persona  # noqa: E402
from tests.integration.servers import postgres_server, scripted_llm_server  # noqa: E402


def rss_mb() -> float:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--personas", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="measured jobs per persona")
    parser.add_argument("--profile", help="write a cProfile of every thread (thread CPU time) here")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="anima-worker-jobs-"))
    names = [f"w{i:03d}" for i in range(args.personas)]
    with postgres_server() as pg_url, chroma_server() as chroma_url, scripted_llm_server() as llm:
        llm.script(default={"do": "stream", "text": THOUGHT}, record=False)
        persona = write_persona(base / "persona", pause_s=0.0)
        deployment = Deployment.open(pg_url)
        for name in names:
            deployment.add(name, persona)
        fleet = Fleet.open(pg_url, pool_size=4)
        deferrer = jobs.make_app(fleet.libpq_url())
        with deferrer.open():
            scheduler = jobs.Scheduler(deferrer, fleet)
            overrides = Overrides.of(chroma_url=chroma_url, llm_url=llm.url, model="scripted", embedded=False)
            runtime = WorkerRuntime(fleet, overrides, scheduler=scheduler, cache_dir=str(base / "cache"))

            def job(name: str) -> None:  # graph/fleet/worker.py: the tick task's body
                with fleet.fence(name):
                    delay = runtime.tick(name)
                if delay is not None:
                    scheduler.schedule_tick(name, delay)

            job(names[0])
            job(names[0])
            one_open = rss_mb()
            for name in names * 2:  # every persona opened and warm
                job(name)
            all_open = rss_mb()
            sent = [0]
            execute = psycopg.Cursor.execute

            def counted(self, *a, **k):
                sent[0] += 1
                return execute(self, *a, **k)

            psycopg.Cursor.execute = counted
            profiles: list[cProfile.Profile] = []
            if args.profile:
                def start(*_: object) -> None:
                    profile = cProfile.Profile(time.thread_time)
                    profiles.append(profile)
                    profile.enable()
                main_profile = cProfile.Profile(time.thread_time)
                profiles.append(main_profile)
                threading.setprofile(start)
                main_profile.enable()
            started = time.process_time()
            for _ in range(args.rounds):
                for name in names:
                    job(name)
            cpu = time.process_time() - started
            if args.profile:
                main_profile.disable()
                threading.setprofile(None)
                stats = pstats.Stats(profiles[0])
                for profile in profiles[1:]:
                    profile.disable()
                    stats.add(profile)
                stats.dump_stats(args.profile)
            psycopg.Cursor.execute = execute
            count = args.rounds * len(names)
            runtime.close()
        fleet.close()
        deployment.close()
    __import__("shutil").rmtree(base, ignore_errors=True)
    print(json.dumps({"personas": len(names), "jobs": count, "cpu_ms_per_job": round(cpu * 1000 / count, 1),
                      "statements_per_job": round(sent[0] / count, 1),
                      "rss_mb": {"one_open": round(one_open, 1), "all_open": round(all_open, 1)},
                      "per_open_persona_mb": round((all_open - one_open) / max(1, len(names) - 1), 2),
                      "profiled": bool(args.profile), "load_average": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
