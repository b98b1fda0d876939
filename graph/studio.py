"""LangGraph Studio / `langgraph dev`: one graph per shipped playbook, compiled without a checkpointer (the API
server brings its own).

The run context a client may send has no fields: where the data lives, which persona, which model and where
its key goes come only from the server's environment and the operator's files (`ANIMA_DATA_DIR`,
`ANIMA_DB_URL`, `ANIMA_PERSONA_DIR`, `ANIMA_LLM_URL`, … — persona/settings.py). A client chooses a thread,
nothing else. The server process opens those services once, on the first step that needs them (blocking I/O
runs in a step's worker thread, never on the server's event loop), and shares them between runs; nothing is
opened when `langgraph dev` imports this module.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from graph.compiler import CompiledTick, build_graph
from graph.playbook import load_playbook, shipped_playbooks_dir
from graph.services import open_services
from nodes.context import Services
from nodes.stelis.threads import recover_orphans


class StudioServices:
    """The server process's services, opened from the environment on first use and kept for its lifetime."""

    def __init__(self) -> None:
        self._services: Services | None = None
        self._lock = threading.Lock()

    def get(self) -> Services:
        with self._lock:
            if self._services is None:
                services = open_services(channel="studio")
                recover_orphans(services)  # Stelis threads a dead server left running
                self._services = services
            return self._services


SERVER = StudioServices()  # opens nothing until a run's first step asks


class ContextRefused(ValueError):
    pass


@dataclass(init=False)
class StudioContext:
    """What a Studio run carries: nothing a client can set. Steps reach the server's services through it."""

    def __init__(self, **given: object) -> None:
        if given:
            raise ContextRefused(
                f"a run cannot set {', '.join(sorted(given))}: where the data lives, the persona and "
                "the model are the server's settings (its ANIMA_* environment)"
            )

    @property
    def services(self) -> Services:
        return SERVER.get()


def _make(name: str) -> Callable[[], CompiledTick]:
    def factory() -> CompiledTick:
        playbook = load_playbook(shipped_playbooks_dir() / f"{name}.yaml")
        return build_graph(playbook, context_schema=StudioContext).compile(name=playbook.name)

    factory.__name__ = f"make_{name}_graph"
    return factory


make_repl_graph = _make("repl")
make_epos_graph = _make("epos")
make_deep_work_graph = _make("deep_work")
make_novel_graph = _make("novel")
make_dream_graph = _make("dream")
make_coding_session_graph = _make("coding_session")
