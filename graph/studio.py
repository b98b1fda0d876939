"""LangGraph Studio / `langgraph dev`: one graph per shipped playbook, compiled without a checkpointer
(the API server brings its own).

The server builds the run context from the JSON a client sends (all fields optional: data_dir, db_url,
persona_dir, llm_url, model). `StudioContext` opens the matching services on first use (from the first step) and reuses them
for later runs with the same settings — this process-wide pool is created on the first request, never
at import time, and exists only in the server process.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from langgraph.graph.state import CompiledStateGraph

from graph.compiler import build_graph
from graph.playbook import load_playbook, shipped_playbooks_dir
from graph.services import RunOptions, open_services
from nodes import AnimaContext
from nodes.stelis import recover_orphans

_pool: dict[tuple, object] = {}
_pool_lock = threading.Lock()


@dataclass
class StudioContext(AnimaContext):
    def resolve_services(self):
        # Runs inside a step (a worker thread), never on the server's event loop: opening is blocking I/O.
        options = RunOptions(
            data_dir=self.data_dir or os.environ.get("ANIMA_DATA_DIR") or "data",
            db_url=self.db_url or os.environ.get("ANIMA_DB_URL"),
            persona_dir=self.persona_dir or os.environ.get("ANIMA_PERSONA_DIR"),
            llm_url=self.llm_url or os.environ.get("ANIMA_LLM_URL"),
            model=self.model or os.environ.get("ANIMA_MODEL"),
            embed_url=os.environ.get("ANIMA_EMBED_URL"),
            embed_model=os.environ.get("ANIMA_EMBED_MODEL"),
            chroma_url=os.environ.get("ANIMA_CHROMA_URL"),
        )
        key = (options.data_dir, options.db_url, options.persona_dir, options.llm_url, options.model)
        with _pool_lock:
            if key not in _pool:
                services = open_services(options, channel="studio")
                recover_orphans(services)  # Stelis threads a dead server left running
                _pool[key] = services
            return _pool[key]


class StudioGraph(CompiledStateGraph):
    """A run started without any context (Studio's default) still gets a `StudioContext`."""

    def stream(self, input, config=None, *, context=None, **kwargs):
        return super().stream(input, config, context={} if context is None else context, **kwargs)

    def astream(self, input, config=None, *, context=None, **kwargs):
        return super().astream(input, config, context={} if context is None else context, **kwargs)


def _make(name: str):
    def factory():
        playbook = load_playbook(shipped_playbooks_dir() / f"{name}.yaml")
        graph = build_graph(playbook, context_schema=StudioContext).compile(name=playbook.name)
        graph.__class__ = StudioGraph
        return graph

    factory.__name__ = f"make_{name}_graph"
    return factory


make_repl_graph = _make("repl")
make_epos_graph = _make("epos")
make_deep_work_graph = _make("deep_work")
make_novel_graph = _make("novel")
make_dream_graph = _make("dream")
