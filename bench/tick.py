"""Tick benchmark (JSON): what one tick costs and where the time goes, with an instant fake LLM at 10k/100k rows
and the real embedding model; on the embedded model, the tick's wall time against the model's own.

    python bench/tick.py [--rows 10000 100000] [--ticks 30] [--embedded-ticks 3]

Each workload runs `--ticks` plain ticks — `median_ms`, `p95_ms` and `cpu_ms` (the process's CPU time per tick,
less disturbed by other processes) are theirs — then as many more with every session, repository, result, step and
model call timed, for the split (timing them costs a tick a few milliseconds: `instrumented_median_ms`). The split
(each tick's parts add up to its wall time; the medians over the instrumented ticks are shown):
  graph_ms          LangGraph's own work around the steps (routing, state merging, the resume check, pruning)
  steps_ms          the steps' own Python: prompt assembly, parsing, reflex bookkeeping (not their SQL or model calls)
  orm_ms            the repositories and SQLAlchemy around the statements: building and compiling them, opening,
                    flushing and committing sessions, loading rows into objects
  sql_ms            inside the database driver (executing statements, fetching rows, commits)
  embedding_ms      inside the embedding model (novelty, the recall query, the memory index)
  vectors_ms        inside Chroma, the vector database (recall's nearest-vector query, the memory index's writes)
  checkpoint_ms     writing LangGraph checkpoints (the saver's own SQLite file)
  llm_ms            inside the (fake, instant) model calls
`orchestration_ms` = graph + steps: what is neither the databases (SQL, Chroma), the embedding model, the checkpoint
nor the model.
`bare_tick_ms` is the yardstick, measured beside each workload (between its plain and its instrumented ticks): a
bare 9-node LangGraph tick — nine no-op nodes in a row over the tick's state schema, on a SqliteSaver opened as a
loop tick's, streamed with durability "exit", then the resume read (`bare_tick_cpu_ms`: its CPU time). `vs_bare`
divides the workload's median tick (wall; `cpu`: CPU by CPU) and orchestration by it (the targets: ≤ 7 and
≤ 2). On a busy machine `--clock cpu` times the split in process CPU time (orchestration then against the bare
tick's CPU), which other work on the machine does not stretch.
The machine is shared and its wall times noisy; the counts per tick are not: `statements_per_tick` (SQL statements
sent), `transactions_per_tick` (commits), `texts_embedded_per_tick` and `embed_calls_per_tick` (calls into the
model), `llm_calls_per_tick` (and by purpose). Both workloads trip the anti-stagnation reflex on most ticks (the
fake thoughts are alike), so its escalation is on the measured path.
Every tick runs the persona's default settings: reflexes, drives and emotions on, with nobody listening to the
tick's events (`Agent.tick`). `floors_ms` measures what no tick can go below on this machine: the same playbook
graph with steps that do nothing (checkpointer and durability as a loop tick; with and without the event stream
a live view listens to), and one text through the embedding model.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import event, insert  # noqa: E402
from sqlalchemy.engine.cursor import CursorResult  # noqa: E402
from sqlalchemy.engine.result import ChunkedIteratorResult, IteratorResult  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

import nodes  # noqa: E402
from graph.agent import build_agent, settle_heap  # noqa: E402
from graph.checkpoint import close_saver, open_sqlite_saver  # noqa: E402
from graph.compiler import build_graph  # noqa: E402
from graph.playbook import load_playbook, resolve_playbook_path  # noqa: E402
from graph.services import open_services  # noqa: E402
from memory.models import Message, Note, Thread  # noqa: E402
from memory.repositories import Repos  # noqa: E402
from memory.retrieval.embeddings import LocalEmbedder  # noqa: E402
from nodes import STEPS  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402

TOPICS = ["tides", "lighthouses", "the moon", "sea birds", "storms", "old maps", "salt", "fog", "harbours", "stars"]


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = [time.perf_counter]


def clock() -> float:
    """The split's clock: wall time, or with `--clock cpu` the process's CPU time (a machine shared with other work
    stretches the wall times of a tick's parts, not their CPU)."""
    return _clock[0]()


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Stopwatch:
    """Accumulated seconds per part of the tick."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds

    def take(self) -> dict[str, float]:
        parts, self.parts = self.parts, {}
        return parts


def timed(watch: Stopwatch, part: str, func):
    def wrapper(*args, **kwargs):
        started = clock()
        try:
            return func(*args, **kwargs)
        finally:
            watch.add(part, clock() - started)

    return wrapper


def counted(watch: Stopwatch, func, outermost: Outermost):
    def wrapper(texts):
        if getattr(outermost.local, "depth", 0) <= 1:  # not a call made from inside another embedding call
            watch.add("texts_embedded", len(texts))
            watch.add("embed_calls", 1)
        return func(texts)

    return wrapper


class Outermost:
    """Times a family of re-entrant calls (SQLAlchemy's session and result methods call each other): only the
    outermost call of a thread counts."""

    def __init__(self, watch: Stopwatch, part: str):
        self.watch, self.part, self.local = watch, part, threading.local()

    def wrap(self, func):
        def wrapper(*args, **kwargs):
            depth = getattr(self.local, "depth", 0)
            self.local.depth = depth + 1
            started = clock()
            try:
                return func(*args, **kwargs)
            finally:
                self.local.depth = depth
                if depth == 0:
                    self.watch.add(self.part, clock() - started)

        wrapper.__wrapped__ = func
        return wrapper


class Patches:
    """The split's instruments, installed for the instrumented ticks and removed after them: timing every session,
    repository and result call costs a tick a few milliseconds, so the headline times come from ticks run without
    them."""

    def __init__(self) -> None:
        self.undo: list = []

    def set(self, owner, name: str, value) -> None:
        had = name in vars(owner)
        original = vars(owner)[name] if had else None
        self.undo.append(lambda: setattr(owner, name, original) if had else delattr(owner, name))
        setattr(owner, name, value)

    def item(self, mapping: dict, key, value) -> None:
        original = mapping[key]
        self.undo.append(lambda: mapping.__setitem__(key, original))
        mapping[key] = value

    def listen(self, target, name: str, fn) -> None:
        event.listen(target, name, fn)
        self.undo.append(lambda: event.remove(target, name, fn))

    def remove(self) -> None:
        while self.undo:
            self.undo.pop()()


DB_METHODS = {
    Session: (
        "__init__",
        "execute",
        "scalars",
        "scalar",
        "get",
        "flush",
        "commit",
        "rollback",
        "close",
        "merge",
        "add",
        "delete",
    ),
    IteratorResult: ("_fetchiter_impl", "_fetchone_impl", "_fetchall_impl", "_fetchmany_impl"),
    ChunkedIteratorResult: ("_fetchmany_impl",),
    CursorResult: ("_fetchiter_impl", "_fetchone_impl", "_fetchall_impl", "_fetchmany_impl"),
}


def repository_classes() -> list[type]:
    """Every repository (all SQL lives in memory/repositories/), and the unit of work that holds them."""
    import inspect

    import memory.repositories as package
    from memory.repositories.base import Repo

    found = {Repos}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(package.__name__ + "."):
            found |= {c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, Repo)}
    return sorted(found, key=lambda c: c.__qualname__)


def instrument_db(patches: Patches, watch: Stopwatch) -> None:
    """The memory's database work is `db`: every repository method (building statements, the ORM, the driver) and
    the session around them (opening, flushing, committing); the driver's own part of it is also `sql`."""
    outermost, fetching = Outermost(watch, "db"), Outermost(watch, "sql")
    for cls, names in DB_METHODS.items():
        for name in names:
            method = getattr(cls, name)
            if cls is CursorResult:  # SQLite computes rows as they are fetched: the driver's time, like executing
                method = fetching.wrap(method)
            patches.set(cls, name, outermost.wrap(method))
    for cls in repository_classes():
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("__") and not isinstance(member, (type, staticmethod)):
                patches.set(cls, name, outermost.wrap(member))


def instrument_steps(patches: Patches, watch: Stopwatch) -> None:
    """Time inside the steps (their SQL and model calls included), for the graph's own share; an agent built
    while they are installed runs them."""
    for name, step in list(STEPS.items()):
        patches.item(STEPS, name, functools.wraps(step)(timed(watch, "steps", step)))
    assert nodes.STEPS is STEPS


def instrument_embedder(patches: Patches, embedder, watch: Stopwatch) -> None:
    """Time in the embedding model, and texts and calls into it (a memory's vector and its sentences' come from
    one pass, `embed_parts`, which may embed an overlong sentence on its own: counted once, as the outer call)."""
    outermost = Outermost(watch, "embedding")
    for name in ("embed", "embed_parts"):
        if hasattr(embedder, name):
            patches.set(embedder, name, outermost.wrap(counted(watch, getattr(embedder, name), outermost)))


def instrument_vectors(patches: Patches, store, watch: Stopwatch) -> None:
    """Time inside Chroma (the vector database): the nearest-vector query and the memory index's writes."""
    outermost = Outermost(watch, "vectors")
    for name in ("nearest", "write", "position", "record_count"):
        patches.set(store, name, outermost.wrap(getattr(store, name)))


def instrument(patches: Patches, agent, fake, watch: Stopwatch) -> None:
    """One bench agent's engine, model and checkpointer."""
    engine = agent.services.db.engine

    def start(conn, cursor, statement, parameters, context, executemany):
        conn.info.setdefault("started", []).append(clock())
        watch.add("statements", 1)

    def stop(conn, cursor, statement, parameters, context, executemany):
        watch.add("sql", clock() - conn.info["started"].pop())

    patches.listen(engine, "before_cursor_execute", start)
    patches.listen(engine, "after_cursor_execute", stop)
    patches.listen(engine, "commit", lambda conn: watch.add("transactions", 1))
    patches.set(engine.dialect, "do_commit", timed(watch, "sql", engine.dialect.do_commit))
    patches.set(fake, "complete", timed(watch, "llm", fake.complete))
    saver = agent.checkpointer
    patches.set(saver, "put", timed(watch, "checkpoint", saver.put))
    patches.set(saver, "put_writes", timed(watch, "checkpoint", saver.put_writes))
    store = getattr(agent.services.memory, "store", None)  # MemoryIndex's Chroma collection
    if store is not None:
        instrument_vectors(patches, store, watch)


def seed_rows(services, rows: int) -> None:
    """`rows` old thoughts and `rows` old human notes, spread over the past year as a database grows (rows all
    stamped "now" would be a fresh backlog the drives work through, not a steady tick)."""
    now = datetime.now(UTC)
    spacing = timedelta(days=365) / rows

    def written(k: int) -> datetime:
        return now - (rows - k) * spacing

    with services.db.session() as s:
        s.merge(Thread(id="main"))
        s.commit()
        batch = 5000
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            s.execute(
                insert(Message),
                [
                    {
                        "thread_id": "main",
                        "tick": 0,
                        "kind": "response",
                        "content": f"old thought {start + i} about {TOPICS[i % 10]} and light",
                        "dedup_key": None,
                        "created_at": written(start + i),
                    }
                    for i in range(n)
                ],
            )
            s.execute(
                insert(Note),
                [
                    {"text": f"old note {start + i}", "source": "user", "read": True, "created_at": written(start + i)}
                    for i in range(n)
                ],
            )
            s.commit()


def varied(prompt: str) -> str:
    """A new thought each tick, as a model would write it (with its own Emotions: line every other tick)."""
    n = len(prompt)
    topic, other = TOPICS[n % len(TOPICS)], TOPICS[(n // 7) % len(TOPICS)]
    text = f"Thinking about {topic} today, and how {other} might change them; idea {n} is new to me."
    return text + ("\nEmotions: curiosity:3 (a new idea)" if n % 2 else "")


def repeating(prompt: str) -> str:
    """Nearly the same thought every tick (the workload this bench used before the consent issue): the
    anti-stagnation reflexes fire on every tick."""
    return f"thought number {len(prompt)} about something new"


WORKLOADS = {"varied": varied, "repeating": repeating}


def calls_by_purpose(services) -> dict[str, int]:
    """Model calls made so far, by purpose (think, evaluate, rephrase, drives, abstract, …)."""
    found: dict[str, int] = {}
    with services.db.unit() as repos:
        for row in repos.llm_calls.by_model():
            found[row["purpose"]] = found.get(row["purpose"], 0) + row["calls"]
    return found


SPLIT = ("graph", "steps", "orm", "sql", "embedding", "vectors", "checkpoint", "llm")
COUNTS = ("statements", "transactions", "texts_embedded", "embed_calls")


def run_ticks(agent, services, workload: str, ticks: int, on_tick=None) -> tuple[list[float], list[float]]:
    """`ticks` ticks (the human writes now and then in the varied workload); their wall and CPU times, in ms."""
    walls, cpu = [], []
    for i in range(ticks):
        if workload == "varied" and i % 5 == 0:  # the human writes now and then: drives, recall, the reply
            with services.db.unit() as repos:
                repos.notes.add(f"What do you think about {TOPICS[i % 10]}?", source="user")
        started, cpu_started = time.perf_counter(), time.process_time()
        if on_tick:
            on_tick("start")
        agent.tick()
        walls.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        if on_tick:
            on_tick(cpu[-1] if _clock[0] is time.process_time else walls[-1])
    return walls, cpu


BARE_NODES = 9


def bare_tick(ticks: int = 40) -> tuple[float, float]:
    """The median ms (wall, CPU) of a bare 9-node LangGraph tick: no-op nodes over `TickState`, the loop tick's
    checkpointer (SqliteSaver, WAL) and durability, then the next tick's "resume or start?" read."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    from nodes.state import TickState

    builder = StateGraph(TickState)
    names = [f"n{i}" for i in range(1, BARE_NODES + 1)]
    for name in names:
        builder.add_node(name, lambda state: {})
    for a, b in zip([START, *names], [*names, LG_END]):
        builder.add_edge(a, b)
    walls, cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        saver = open_sqlite_saver(Path(tmp) / "checkpoints.sqlite")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "bare"}}
        for _ in range(ticks + 5):
            started, cpu_started = time.perf_counter(), time.process_time()
            for _chunk in graph.stream(
                {"thread_id": "main", "root_thread": "main"}, config, stream_mode=["updates"], durability="exit"
            ):
                pass
            graph.get_state(config)
            walls.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
        saver.conn.close()
    return round(statistics.median(walls[5:]), 2), round(statistics.median(cpu[5:]), 2)


def fake_overhead(rows: int, ticks: int, embedder: LocalEmbedder, workload: str) -> dict:
    """`ticks` plain ticks for the times, then as many with the split's instruments (the same persona and thread,
    continued)."""
    median = lambda xs: round(statistics.median(xs), 2)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeLLM("fake", responses=WORKLOADS[workload])
        services = open_services(
            data_dir=tmp,
            embedded=False,
            providers={"fake": fake},
            embedder=embedder,
            entries=[{"id": "fake", "provider": "fake", "priority": 1}],
        )
        progress(f"seeding {rows} messages + {rows} notes over the past year…")
        seed_rows(services, rows)
        agent = build_agent("repl", services=services, checkpointer="sqlite")
        for _ in range(3):  # warm-up: the embedding model loads, caches fill
            agent.tick()
        settle_heap()  # as the loop driver does once it has started (gc.freeze)
        walls, cpu = run_ticks(agent, services, workload, ticks)
        close_saver(agent.checkpointer)
        bare, bare_cpu = bare_tick()  # the yardstick, measured now: the machine as the plain ticks had it

        watch, patches = Stopwatch(), Patches()
        try:
            instrument_steps(patches, watch)
            instrument_db(patches, watch)
            instrument_embedder(patches, embedder, watch)
            agent = build_agent("repl", services=services, checkpointer="sqlite")  # compiled with the timed steps
            instrument(patches, agent, fake, watch)
            purposes_before, calls_before = calls_by_purpose(services), len(fake.calls)
            parts_of, counts = [], {k: 0.0 for k in COUNTS}

            def split(moment) -> None:
                if moment == "start":
                    watch.take()  # the note the human wrote is not the tick's
                    return
                parts = {k: v * 1000 for k, v in watch.take().items()}
                for key in COUNTS:
                    counts[key] += parts.get(key, 0) / 1000
                steps, db, sql = parts.get("steps", 0.0), parts.get("db", 0.0), parts.get("sql", 0.0)
                outside = sum(parts.get(k, 0.0) for k in ("embedding", "llm", "vectors"))  # models, Chroma
                parts_of.append(
                    {
                        "graph": moment - steps - parts.get("checkpoint", 0.0),
                        "steps": steps - db - outside,
                        "orm": db - sql,
                        "sql": sql,
                        "embedding": parts.get("embedding", 0.0),
                        "vectors": parts.get("vectors", 0.0),
                        "checkpoint": parts.get("checkpoint", 0.0),
                        "llm": parts.get("llm", 0.0),
                    }
                )

            instrumented, _ = run_ticks(agent, services, workload, ticks, on_tick=split)
            calls = len(fake.calls) - calls_before
            purposes = {
                k: round((v - purposes_before.get(k, 0)) / ticks, 2)
                for k, v in sorted(calls_by_purpose(services).items())
                if v > purposes_before.get(k, 0)
            }
        finally:
            patches.remove()
        agent.close()
        orchestration = median([p["graph"] + p["steps"] for p in parts_of])
        by_cpu = _clock[0] is time.process_time
        return {
            "workload": workload,
            "rows": rows,
            "ticks": ticks,
            "median_ms": median(walls),
            "p95_ms": round(sorted(walls)[int(0.95 * (len(walls) - 1))], 2),
            "cpu_ms": median(cpu),
            "orchestration_ms": orchestration,
            "bare_tick_ms": bare,
            "bare_tick_cpu_ms": bare_cpu,
            "vs_bare": {
                "median": round(median(walls) / bare, 2),
                "cpu": round(median(cpu) / bare_cpu, 2),
                "orchestration": round(orchestration / (bare_cpu if by_cpu else bare), 2),
            },
            "split_clock": "cpu" if by_cpu else "wall",
            "split_median_ms": {key: median([p[key] for p in parts_of]) for key in SPLIT},
            "instrumented_median_ms": median(instrumented),
            "llm_calls_per_tick": round(calls / ticks, 2),
            "llm_calls_per_tick_by_purpose": purposes,
            **{f"{key}_per_tick": round(counts[key] / ticks, 2) for key in COUNTS},
        }


def floors(embedder: LocalEmbedder, ticks: int = 40) -> dict:
    """The graph's own cost (no-op steps) and one text through the embedding model."""
    playbook = load_playbook(resolve_playbook_path("repl"))
    no_op = {step: (lambda state, params=None: {}) for step in STEPS}
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        saver = open_sqlite_saver(Path(tmp) / "checkpoints.sqlite")
        graph = build_graph(playbook, steps=no_op).compile(checkpointer=saver)
        for label, modes, subgraphs in (
            ("graph_no_op_steps", ["updates"], False),
            ("graph_no_op_steps_with_events", ["updates", "custom"], True),
        ):
            config = {"configurable": {"thread_id": label}}
            walls = []
            for _ in range(ticks):
                started = time.perf_counter()
                for _chunk in graph.stream(
                    {"thread_id": "main", "root_thread": "main"},
                    config,
                    stream_mode=modes,
                    subgraphs=subgraphs,
                    durability="exit",
                ):
                    pass
                graph.get_state(config)  # the next tick's "resume or start?" read
                walls.append((time.perf_counter() - started) * 1000)
            result[label] = round(statistics.median(walls[5:]), 2)
        saver.conn.close()
    texts = [f"Thinking about {TOPICS[i % 10]} today, and how idea {i} might change them." for i in range(ticks)]
    embeds = []
    for text in texts:
        started = time.perf_counter()
        embedder.embed([text])
        embeds.append((time.perf_counter() - started) * 1000)
    result["embed_one_text"] = round(statistics.median(embeds[5:]), 2)
    return result


def embedded(ticks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        agent = build_agent("repl", data_dir=tmp, embedded_context_window=4096)
        walls = []
        for i in range(ticks):
            progress(f"embedded tick {i + 1}/{ticks}…")
            started = time.perf_counter()
            state = agent.tick()
            walls.append((time.perf_counter() - started) * 1000)
        with agent.services.db.unit() as repos:
            rows = repos.ticks.recent(ticks)
            calls = repos.llm_calls.totals("main")
        agent.close()
        llm_ms = [t.llm_ms for t in rows]
        return {
            "ticks": ticks,
            "median_tick_ms": round(statistics.median(walls), 1),
            "median_llm_ms": round(statistics.median(llm_ms), 1),
            "tick_to_llm_ratio": round(sum(walls) / sum(llm_ms), 3),
            "llm_calls_per_tick": round(calls["calls"] / ticks, 2),
            "prompt_tokens_per_tick": round(calls["prompt_tokens"] / ticks, 1),
            "completion_tokens_per_tick": round(calls["completion_tokens"] / ticks, 1),
            "last_tokens_per_s": (state.get("llm") or {}).get("tokens_per_s"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--embedded-ticks", type=int, default=3)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), nargs="+", default=sorted(WORKLOADS))
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="the split's clock (cpu: the process's CPU time, for a busy machine)",
    )
    args = parser.parse_args()
    _clock[0] = CLOCKS[args.clock]
    embedder = LocalEmbedder()
    result = {
        "fake_llm": [fake_overhead(r, args.ticks, embedder, w) for w in args.workload for r in args.rows],
        "floors_ms": {"bare_9_node_tick": bare_tick()[0], **floors(embedder)},
    }
    if args.embedded_ticks:
        result["embedded"] = embedded(args.embedded_ticks)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
