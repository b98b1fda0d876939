"""Playbook `stelis_start` / `stelis_end`: the region between them runs as a child thread.

`enter_stelis` is the parent's node for the whole region. It opens the child thread (its id derives
from the parent thread, the label and the LangGraph task id, so a resumed run finds the same child),
runs the compiled region graph on it as a subgraph, and returns the result to the parent's variables.
Whatever happens inside, control comes back to the parent:

- the region finishes → `stelis_end` wrote the chronicle and marked the thread completed;
- an exception → the thread is aborted with a chronicle of what it did, the parent carries on;
- a drain (Ctrl-C in the CLI, shutdown) → aborted with a chronicle, then the parent stops at its next step;
- KeyboardInterrupt → aborted with a plain record (no model call while the user waits), re-raised;
- a killed process → start-up recovery aborts it; the resumed parent sees it aborted and carries on;
- a LangGraph breakpoint/interrupt → the child stays running and resumes with the parent.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from langgraph.errors import GraphDrained, GraphInterrupt
from langgraph.runtime import Runtime

from managers.owners import owner_alive, process_token
from managers.threads import StelisRefused
from nodes.context import AnimaContext, checkpoint_thread_of, services_of
from nodes.kinds.expressions import ExpressionError, render
from nodes.kinds.variables import namespace
from nodes.state import TickState, VarsUpdate
from nodes.stelis.threads import (
    StelisResult,
    child_thread_id,
    close_thread,
    open_thread,
)

log = logging.getLogger(__name__)


def _result_update(node: Any, result: StelisResult, child_vars: dict[str, Any] | None = None) -> VarsUpdate:
    copied = {name: (child_vars or {}).get(name) for name in node.outputs}
    return {"vars": {node.result: result.as_dict(), **copied}}


def enter_stelis(
    state: TickState, runtime: Runtime[AnimaContext], node: Any, child: Any, playbook: str = ""
) -> VarsUpdate:
    services = services_of(runtime)
    parent_id = state.thread_id or checkpoint_thread_of(runtime) or "main"
    try:
        label = render(node.label, namespace(state, services.persona.display_name)).strip() or node.id
    except ExpressionError as exc:
        label = node.id
        log.warning("stelis_start %s: label template failed (%s); using the node id", node.id, exc)
    task_id = getattr(runtime.execution_info, "task_id", None) or uuid.uuid4().hex
    child_id = child_thread_id(parent_id, label, task_id)
    writer = runtime.stream_writer
    try:
        with services.db.unit() as repos:
            thread, window, existed = open_thread(
                services,
                repos,
                parent_id=parent_id,
                child_id=child_id,
                label=label,
                window_ratio=node.window_ratio,
                max_depth=node.max_depth,
                origin="playbook",
                tick=state.tick,
                chronicle_prompt=node.chronicle_prompt,
                playbook=playbook,
            )
            status, owner = thread.status, thread.owner
            result = StelisResult.of(thread, window)
    except StelisRefused as exc:
        log.warning("%s", exc)
        writer({"event": "stelis_refused", "label": label, "error": str(exc)})
        return _result_update(node, StelisResult(None, label, "refused", error=str(exc)))
    if existed and status != "running":
        return _result_update(node, result)  # a resumed parent: the child already ended (or was aborted)
    if existed and owner != process_token():
        if owner_alive(owner):
            raise RuntimeError(f"Stelis thread {child_id} is running in another process ({owner})")
        result = close_thread(services, child_id, status="aborted", error=f"the process running it ({owner}) stopped")
        return _result_update(node, result)
    writer(
        {
            "event": "stelis_enter",
            "thread_id": child_id,
            "label": label,
            "depth": result.depth,
            "window_tokens": window,
            "resumed": existed,
        }
    )
    child_input = {
        "thread_id": child_id,
        "root_thread": state.root_thread or parent_id,
        "run_id": state.run_id,
        "tick": 0,
        "mode": state.mode,
        "vars": dict(state.vars),
    }
    child_vars: dict[str, Any] = {}
    try:
        final = child.invoke(None if existed else child_input)
        child_vars = dict((final or {}).get("vars") or {})
    except GraphDrained as exc:
        result = close_thread(
            services, child_id, status="aborted", error=f"interrupted: the run was stopped ({exc.reason})"
        )
    except GraphInterrupt:
        raise  # a breakpoint: the child stays running and resumes with the parent
    except KeyboardInterrupt:
        close_thread(services, child_id, status="aborted", error="interrupted (KeyboardInterrupt)", use_llm=False)
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside the child returns control to the parent
        log.exception("Stelis thread %s failed", child_id)
        result = close_thread(services, child_id, status="aborted", error=f"{type(exc).__name__}: {exc}"[:2000])
    else:
        with services.managers.reading() as house:
            row = house.threads.get(child_id)
            still_running = row is not None and row.status == "running"
        result = (
            close_thread(services, child_id, status="completed", generate=False)
            if still_running
            else StelisResult.of(row or thread, window)
        )  # as the child left it
    writer(
        {
            "event": "stelis_leave",
            "thread_id": child_id,
            "label": label,
            "status": result.status,
            "chronicle_chars": len(result.chronicle or ""),
            "error": result.error,
        }
    )
    return _result_update(node, result, child_vars)


def end_stelis(state: TickState, runtime: Runtime[AnimaContext], node: Any = None) -> VarsUpdate:
    """The last node of the child graph: write the chronicle and mark the thread completed."""
    services = services_of(runtime)
    thread_id = state.thread_id
    result = close_thread(services, thread_id, status="completed", generate=bool(node.generate_chronicle))
    return {"vars": {"chronicle": result.chronicle}}
