"""The programmatic API: `build_agent(...)` → an `Agent` whose `tick()` runs one checkpointed tick.

    from graph import build_agent
    agent = build_agent("playbooks/repl.yaml", data_dir="data")
    final_state = agent.tick()
    for mode, data in agent.stream(): ...   # ("updates", {node: update}) and ("custom", {"event": …})

One invoke per tick on a persistent thread id. Checkpoints are written after every step
(`durability="sync"`): a killed or interrupted tick resumes at the step that was running, so a model
answer is never generated twice and commands (exactly-once by cmd_id) never run twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl

from graph.checkpoint import DEFAULT_KEEP, open_sqlite_saver, prune_checkpoints
from graph.compiler import build_graph
from graph.playbook import Playbook, load_playbook, shipped_playbooks_dir
from graph.services import RunOptions, checkpoint_path, open_services
from nodes import AnimaContext, Services

DURABILITY = "sync"


class Agent:
    def __init__(self, playbook: Playbook, services: Services, checkpointer: BaseCheckpointSaver,
                 thread_id: str = "main", keep_checkpoints: int = DEFAULT_KEEP):
        self.playbook = playbook
        self.services = services
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.keep_checkpoints = keep_checkpoints
        self.graph: CompiledStateGraph = build_graph(playbook).compile(checkpointer=checkpointer)
        self.context = AnimaContext(services=services)

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}, "recursion_limit": 100}

    def state(self) -> dict[str, Any]:
        return dict(self.graph.get_state(self.config).values)

    @property
    def interrupted(self) -> bool:
        """True when the last tick stopped between steps (Ctrl-C or a kill) and will resume."""
        return bool(self.graph.get_state(self.config).next)

    def stream(self, control: RunControl | None = None) -> Iterator[tuple[str, Any]]:
        """Run one tick (or finish an interrupted one), yielding (mode, data) as steps complete."""
        payload = None if self.interrupted else {"thread_id": self.thread_id}
        yield from self.graph.stream(payload, self.config, context=self.context, stream_mode=["updates", "custom"],
                                     durability=DURABILITY, control=control)
        if hasattr(self.checkpointer, "conn"):
            prune_checkpoints(self.checkpointer, self.thread_id, self.keep_checkpoints)

    def tick(self, control: RunControl | None = None) -> dict[str, Any]:
        for _ in self.stream(control):
            pass
        return self.state()

    def close(self) -> None:
        conn = getattr(self.checkpointer, "conn", None)
        if conn is not None:
            conn.close()
        self.services.db.close()


def resolve_playbook(playbook: str | Path) -> Path:
    path = Path(playbook)
    if not path.exists() and not path.suffix:
        path = shipped_playbooks_dir() / f"{playbook}.yaml"
    return path


def build_agent(playbook: str | Path = "repl", *, thread_id: str = "main", checkpointer: str | BaseCheckpointSaver = "sqlite",
                services: Services | None = None, **options: Any) -> Agent:
    """Open services from `options` (see `RunOptions`) unless given, and compile the playbook."""
    run_options = RunOptions(**{k: v for k, v in options.items() if k in RunOptions.__dataclass_fields__})
    overrides = {k: v for k, v in options.items() if k not in RunOptions.__dataclass_fields__}
    services = services or open_services(run_options, **overrides)
    if checkpointer == "sqlite":
        saver: BaseCheckpointSaver = open_sqlite_saver(checkpoint_path(run_options.data_dir))
    elif checkpointer == "memory":
        saver = InMemorySaver()
    else:
        saver = checkpointer  # type: ignore[assignment]
    return Agent(load_playbook(resolve_playbook(playbook)), services, saver, thread_id=thread_id)
