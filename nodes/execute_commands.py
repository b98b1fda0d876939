"""Step 9: run the validated commands exactly once each, then close the tick.

Each command runs in its own transaction together with its `executed_commands` row (unique
`thread:tick:cmd_id`), so after a kill the re-run step skips what already committed and runs the rest.
Commands below the validation threshold (dangerous families need +2) are stored as `unvalidated` and
not run. A failing handler rolls its effect back and is recorded as `failed`; it never crashes the tick.
Events such as messages to the human go to the run's custom stream only after their commit.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.exc import IntegrityError

from nodes.commands import Command, CommandContext, CommandError, CommandResult, handlers
from nodes.commands.cycle import load_cycle
from nodes.context import AnimaContext, Services, services_of
from nodes.state import TickState

log = logging.getLogger(__name__)
DANGEROUS_FAMILIES = {"process", "shell", "config", "identity"}
# HMP auxiliary cycles in read_only mode: read anything, create notes/tasks/llm_memory, edit only their own task.
READ_ONLY_SUFFIXES = (".list", ".read", ".search", ".show", ".stats", ".query", ".archived")
READ_ONLY_CREATE = {"notes.add", "tasks.add", "llm_memory.add"}
READ_ONLY_EXCLUDED = {"notes.read"}  # it marks the note read: the main loop's business


def read_only_refusal(cmd: Command, task_id: int) -> str | None:
    """None when a read-only task cycle may run the command, else why not."""
    if cmd.type in READ_ONLY_CREATE or (cmd.type.endswith(READ_ONLY_SUFFIXES) and cmd.type not in READ_ONLY_EXCLUDED):
        return None
    if cmd.type == "tasks.update":
        target = cmd.args.get("id", cmd.args.get("task_id"))
        if str(target) == str(task_id):
            return None
        return (f"a read-only task cycle may edit only its own task ({task_id}), not task {target}; "
                "propose the change to the main loop with notes.add")
    return (f"{cmd.type} would change records a read-only task cycle may not touch; "
            "propose it to the main loop with notes.add")


def required_rating(cmd: Command, svc: Services) -> float:
    """The configured threshold of the command's type, else of its family (reflexes.command_thresholds), else +2
    for dangerous families, else the general validation threshold."""
    configured = svc.settings.command_thresholds
    for key in (cmd.type, cmd.family):
        if key in configured:
            return configured[key]
    return max(2.0, svc.settings.validation_threshold) if cmd.family in DANGEROUS_FAMILIES else svc.settings.validation_threshold


def _gate(cmd: Command, validation: dict[str, Any], svc: Services) -> str | None:
    """None when the command may run, else why not."""
    if cmd.family == "shell" and not svc.settings.shell_enabled:
        return "shell commands are disabled (the operator must enable them)"
    if validation.get("auto_pass"):
        return None
    rating = validation.get("rating")
    needed = required_rating(cmd, svc)
    if rating is None or rating < needed:
        return f"validation rating {rating} below {needed:+g}"
    return None


def _run_one(cmd: Command, state: TickState, svc: Services, llm_id: str | None) -> tuple[dict[str, Any], list[dict]]:
    key = f"{state['thread_id']}:{state['tick']}:{cmd.cmd_id}"
    base = {"cmd_id": cmd.cmd_id, "type": cmd.type}
    record = dict(cmd_key=key, thread_id=state["thread_id"], tick=state["tick"], cmd_id=cmd.cmd_id, type=cmd.type,
                  args=cmd.args, description=cmd.description)
    spec = handlers().get(cmd.type)
    blocked = _gate(cmd, state.get("validation") or {}, svc)
    try:
        with svc.db.unit() as repos:
            done = repos.commands.get(key)
            if done is not None:
                return {**base, "status": done.status, "result": done.result, "already_done": True}, []
            if blocked:
                repos.commands.record(**record, status="unvalidated", result=blocked)
                return {**base, "status": "unvalidated", "result": blocked}, []
            task = repos.tasks.by_repl_thread(state["thread_id"])
            refusal = read_only_refusal(cmd, task.id) if task is not None and task.repl_mode == "read_only" else None
            if refusal:
                repos.commands.record(**record, status="refused", result=refusal)
                repos.processes.add(cmd.type, refusal, status="error", thread_id=state["thread_id"], task_id=task.id)
                return {**base, "status": "refused", "result": refusal}, []
            if spec is None:
                message = f"unknown command type {cmd.type!r}; see help.show"
                repos.commands.record(**record, status="unknown", result=message)
                repos.processes.add(cmd.type, message, status="error", thread_id=state["thread_id"])
                return {**base, "status": "unknown", "result": message}, []
            ctx = CommandContext(repos=repos, thread_id=state["thread_id"], tick=state["tick"], llm_id=llm_id,
                                 settings=svc.settings, now=svc.clock(), services=svc,
                                 root_thread=state.get("root_thread") or state["thread_id"],
                                 task_id=task.id if task is not None else None)
            result: CommandResult = spec.handler(cmd, ctx)
            if result.show:
                repos.processes.add(cmd.type, result.output, status="ok", thread_id=result.thread_id or state["thread_id"])
            repos.commands.record(**record, status=result.status, result=result.output)
            return {**base, "status": result.status, "result": result.output}, ctx.events
    except IntegrityError:  # another process committed the same cmd_key first
        return {**base, "status": "executed", "result": "already executed", "already_done": True}, []
    except Exception as exc:  # handler failed: its effect was rolled back with the transaction
        expected = isinstance(exc, (CommandError, LookupError, ValueError))  # bad arguments, unknown ids, limits
        message = (str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)) if expected \
            else f"{type(exc).__name__}: {exc}"  # str(KeyError) is the repr: quoted
        if not expected:
            log.exception("command %s failed", cmd.cmd_id)
        with svc.db.unit() as repos:
            if repos.commands.get(key) is None:
                repos.commands.record(**record, status="failed", result=message[:2000])
                repos.processes.add(cmd.type, message[:2000], status="error", thread_id=state["thread_id"])
        return {**base, "status": "failed", "result": message}, []


def execute_commands(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    llm_id = (state.get("llm") or {}).get("llm_id")
    executed = []
    for raw in state.get("commands") or []:
        outcome, events = _run_one(Command.model_validate(raw), state, svc, llm_id)
        executed.append(outcome)
        for event in events:
            runtime.stream_writer(event)
    if executed:
        svc.sync_memory()
    with svc.db.unit() as repos:
        totals = repos.llm_calls.totals(state["thread_id"], state["tick"])
        cycle = load_cycle(repos, state["thread_id"])
        novelty, validation = state.get("novelty") or {}, state.get("validation") or {}
        repos.ticks.finish(
            state["thread_id"], state["tick"],
            status="degraded" if state.get("degraded") else "ok",
            summary={"commands": [{"cmd_id": e["cmd_id"], "type": e["type"], "status": e["status"]} for e in executed],
                     "parse_errors": state.get("parse_errors") or [], "novelty": novelty.get("novelty_score"),
                     "stagnation": bool(novelty.get("stagnation_flag")), "rating": validation.get("rating"),
                     "auto_pass": validation.get("auto_pass"), "emotions": state.get("emotions") or [],
                     "context": state.get("context_report") or {}, "error": state.get("error"),
                     "drives": {k: (state.get("drives") or {}).get(k) for k in ("levels", "dominant", "reach_out")}
                     if (state.get("drives") or {}).get("levels") else None},
            llm_calls=totals["calls"], prompt_tokens=totals["prompt_tokens"],
            completion_tokens=totals["completion_tokens"], llm_ms=totals["latency_ms"],
        )
    pause_s = max(float(cycle.get("pause_s") or 0.0),
                  float((state.get("stagnation") or {}).get("pause_s") or 0.0))  # the anti-stagnation pause
    return {"executed": executed, "pause_s": pause_s,
            "idle": bool(cycle.get("idle"))}
