"""A fleet worker's tick jobs in one process, measured (JSON): the job's body as `run.py worker` runs it (the
persona's fence, `WorkerRuntime.tick`, the next tick deferred) on a real PostgreSQL cluster, a `chroma run` server and
an instant scripted model, without the job engine's fetching around it — what a warm persona's job costs a worker:

- `cpu_ms_per_job`: the process's CPU time per job (every thread: LangGraph runs the steps in its own);
- `statements_per_job`: statements sent through psycopg (SQLAlchemy's, the checkpointer's, the job engine's defers);
- `rss_mb`: the process before any persona was open but one, and `per_open_persona_mb` for each one more it keeps open.

- `split_ms` (with `--split`): the job's CPU per component, each call's own thread CPU time minus that of the
  components it called (so a statement a step runs counts to SQL, not to the step): SQL (SQLAlchemy's Core
  execution and psycopg, the round trip's client side), the ORM (sessions, flushes, commits), fetching rows and
  building objects from them, the embedding model (the calling thread; onnxruntime's own threads fall in `rest`),
  Chroma's HTTP client, the checkpointer (PostgresSaver), the steps' own Python (LangGraph's node calls), the live
  journal, the job engine's defer; `rest` is what none of them holds (LangGraph's loop, the worker's own code, the
  garbage collector, other threads). Wrapping costs a few percent; compare runs made alike.

    python bench/worker_jobs.py [--personas 20] [--rounds 5] [--profile out.prof | --split]

`--profile`: cProfile on every thread the jobs start, timed in thread CPU time (`python -m pstats out.prof`).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
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


class Split:
    """Exclusive thread CPU per component (module doc: `split_ms`): `wrap` puts a method under a component; a call's
    time, less that of the wrapped calls inside it, is the component's."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.local = threading.local()
        self.on = False

    def wrap(self, owner: object, attr: str, component: str) -> None:
        original = getattr(owner, attr)
        split = self

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if not split.on:
                return original(*args, **kwargs)
            stack = split.local.__dict__.setdefault("stack", [])
            now = time.thread_time()
            if stack:  # the caller's component stops here
                split.spent[stack[-1][0]] = split.spent.get(stack[-1][0], 0.0) + now - stack[-1][1]
            stack.append([component, now])
            try:
                return original(*args, **kwargs)
            finally:
                now = time.thread_time()
                done, since = stack.pop()
                split.spent[done] = split.spent.get(done, 0.0) + now - since
                if stack:
                    stack[-1][1] = now

        setattr(owner, attr, timed)

    def install(self) -> None:
        import chromadb.api.fastapi
        import langgraph.pregel._runner
        import sqlalchemy.engine.base
        import sqlalchemy.engine.result
        import sqlalchemy.orm.session
        from langgraph.checkpoint.postgres import PostgresSaver

        import memory.retrieval.embeddings as embeddings
        from graph.loop.journal import LiveJournal

        self.wrap(sqlalchemy.engine.base.Connection, "_execute_context", "sql (Core execution, psycopg)")
        for name in ("execute", "scalars", "scalar", "get", "flush", "commit", "rollback", "close"):
            self.wrap(sqlalchemy.orm.session.Session, name, "orm (sessions, flushes, commits)")
        for cls in (
            sqlalchemy.engine.result.Result,
            sqlalchemy.engine.result.ScalarResult,
            sqlalchemy.engine.result.MappingResult,
        ):
            for name in (
                "all",
                "first",
                "one",
                "one_or_none",
                "scalar_one",
                "scalar_one_or_none",
                "scalar",
                "fetchall",
                "fetchone",
                "__iter__",
                "__next__",
            ):
                if hasattr(cls, name):
                    self.wrap(cls, name, "fetch (rows, ORM objects)")
        for name in ("put", "put_writes", "get_tuple", "list", "prune"):
            self.wrap(PostgresSaver, name, "checkpointer")
        self.wrap(chromadb.api.fastapi.FastAPI, "_make_request", "chroma (HTTP client)")
        for cls in vars(embeddings).values():
            if isinstance(cls, type) and cls.__module__ == embeddings.__name__:
                for name in ("embed", "embed_parts", "embed_texts"):
                    if name in cls.__dict__:
                        self.wrap(cls, name, "embedding")
        self.wrap(langgraph.pregel._runner, "run_with_retry", "steps (their own Python)")
        self.wrap(LiveJournal, "__call__", "live journal")
        self.wrap(jobs.Scheduler, "_defer", "job engine (defer)")

    def per_job(self, cpu: float, jobs_run: int) -> dict[str, float]:
        split = {
            name: round(spent * 1000 / jobs_run, 1) for name, spent in sorted(self.spent.items(), key=lambda kv: -kv[1])
        }
        split["rest"] = round((cpu - sum(self.spent.values())) * 1000 / jobs_run, 1)
        return split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--personas", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="measured jobs per persona")
    parser.add_argument("--profile", help="write a cProfile of every thread (thread CPU time) here")
    parser.add_argument("--split", action="store_true", help="the job's CPU per component (split_ms)")
    args = parser.parse_args()
    split = Split()
    if args.split:
        split.install()
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
            split.on = args.split
            started = time.process_time()
            for _ in range(args.rounds):
                for name in names:
                    job(name)
            cpu = time.process_time() - started
            split.on = False
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
    print(
        json.dumps(
            {
                "personas": len(names),
                "jobs": count,
                "cpu_ms_per_job": round(cpu * 1000 / count, 1),
                "statements_per_job": round(sent[0] / count, 1),
                "rss_mb": {"one_open": round(one_open, 1), "all_open": round(all_open, 1)},
                "per_open_persona_mb": round((all_open - one_open) / max(1, len(names) - 1), 2),
                "profiled": bool(args.profile),
                "load_average": round(os.getloadavg()[0], 2),
                **({"split_ms": split.per_job(cpu, count)} if args.split else {}),
            }
        )
    )


if __name__ == "__main__":
    main()
