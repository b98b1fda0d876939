"""Where the graph's share of a tick comes from (JSON): LangGraph's own CPU per tick around the repl playbook's
steps, in one process, with the steps

    real      the persona's steps (the fake LLM, 10k rows, as bench/tick.py runs them)
    replayed  steps that return the updates the real steps returned last (the same keys and values written,
              nothing else done): what writing the tick's state costs the graph
    no_op     steps that return nothing (bench/tick.py's `graph_no_op_steps` floor)
    replayed_busy  replayed, each step also walking ~16 MB of memory first (as a real step's rows, ORM objects and
              model buffers do): what a step's memory traffic costs the LangGraph code that runs after it

    python bench/graph_share.py [--rows 10000] [--ticks 40]

`graph_ms` is the tick's process CPU less the steps' and the checkpoint saver's (`put`, `put_writes`); medians.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tick import WORKLOADS, seed_rows  # noqa: E402
from graph.agent import Agent, build_agent, settle_heap  # noqa: E402
from graph.checkpoint import open_sqlite_saver  # noqa: E402
from graph.compiler import build_graph  # noqa: E402
from graph.services import open_services  # noqa: E402
from memory.retrieval.embeddings import LocalEmbedder  # noqa: E402
from nodes import STEPS  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402

BUSY = list(range(2_000_000))  # ~16 MB of pointers (and the ints they point to)


class Split:
    """CPU inside the steps and the saver, accumulated per tick."""

    def __init__(self) -> None:
        self.inside = 0.0
        self.last: dict[str, Any] = {}

    def timed(self, func: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                result = func(*args, **kwargs)
                if name is not None:
                    self.last[name] = result
                return result
            finally:
                self.inside += time.process_time() - started

        return wrapper


def agent_over(base: Agent, steps: dict[str, Any], split: Split, path: Path) -> Agent:
    saver = open_sqlite_saver(path)
    for name in ("put", "put_writes"):
        setattr(saver, name, split.timed(getattr(saver, name)))
    return Agent(
        base.playbook, base.services, saver, graph=build_graph(base.playbook, steps).compile(checkpointer=saver)
    )


def graph_ms(agent: Agent, split: Split, ticks: int) -> float:
    for _ in range(3):
        agent.tick()
    found = []
    for _ in range(ticks):
        split.inside = 0.0
        started = time.process_time()
        agent.tick()
        found.append((time.process_time() - started - split.inside) * 1000)
    return round(statistics.median(found), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--ticks", type=int, default=40)
    args = parser.parse_args()
    split = Split()
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeLLM("fake", responses=WORKLOADS["repeating"])
        services = open_services(
            data_dir=tmp,
            embedded=False,
            providers={"fake": fake},
            embedder=LocalEmbedder(),
            entries=[{"id": "fake", "provider": "fake", "priority": 1}],
        )
        seed_rows(services, args.rows)
        base = build_agent("repl", services=services, checkpointer="memory")
        real = agent_over(base, {n: split.timed(f, n) for n, f in STEPS.items()}, split, Path(tmp) / "real.sqlite")
        settle_heap()
        result = {"rows": args.rows, "ticks": args.ticks, "graph_ms": {"real": graph_ms(real, split, args.ticks)}}
        updates = dict(split.last)

        def replay(name: str, busy: bool) -> Callable[..., Any]:
            def step(state: Any, runtime: Any = None, params: Any = None) -> Any:
                if busy:
                    sum(BUSY[::7])
                return updates.get(name) or {}

            return step

        for label, steps in (
            ("replayed", {n: split.timed(replay(n, False)) for n in STEPS}),
            ("no_op", {n: split.timed(lambda state, params=None: {}) for n in STEPS}),
            ("replayed_busy", {n: split.timed(replay(n, True)) for n in STEPS}),
        ):
            result["graph_ms"][label] = graph_ms(
                agent_over(base, steps, split, Path(tmp) / f"{label}.sqlite"), split, args.ticks
            )
        result["graph_ms"]["real_again"] = graph_ms(real, split, args.ticks)
        result["keys_written_per_tick"] = sum(len(u) for u in updates.values() if isinstance(u, dict))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
