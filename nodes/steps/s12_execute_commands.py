"""Step 12 (HMP): run what the human approved since the last tick, then this tick's commands, each exactly once;
then close the tick.

Each command runs in its own transaction together with its `executed_commands` row (unique `thread:tick:cmd_id`),
so after a kill the re-run step skips what already committed and runs the rest. The consent gate
(managers/consent.py) decides from the command's declared effect: run, park for the human's approval, or
refuse (stored as `unvalidated`/`blocked`, not run). A failing handler rolls its effect back and is recorded as
`failed`; it never crashes the tick. Events such as messages to the human go to the stream only after commit.

Provenance follows what it taints (memory/provenance.py, memory/taint.py): from a tick whose prompt held untrusted
text, every memory row a command writes keeps the tick's sources, and so does the thought itself (but for what
reached the prompt only through an earlier thought); a command's result that shows a tainted row carries its
sources to the prompt that shows the result. What the owner approved runs clean.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.exc import IntegrityError

from managers import Managers
from managers.audience import ALONE, Audience
from managers.consent import CommandCall
from managers.threads import SIMULATION
from memory import provenance
from nodes.commands import Command, CommandContext, CommandError, CommandResult, Registry, registry
from nodes.commands.spec import CommandSpec
from nodes.commands.thoughts import SELF_ERROR, flags_this_thought
from nodes.context import CYCLE, AnimaContext, Services, services_of
from nodes.state import ExecutedCommand, ExecutionUpdate, TickState
from nodes.stelis.threads import close_thread

log = logging.getLogger(__name__)
# HMP auxiliary cycles in read_only mode: read anything, create notes/tasks/llm_memory, edit only their own task.
READ_ONLY_CREATE = {"notes.add", "tasks.add", "llm_memory.add"}
READ_ONLY_EXCLUDED = {"notes.read"}  # it marks the note read: the main loop's business


def read_only_refusal(cmd: Command, effect: str, task_id: int) -> str | None:
    """None when a read-only task cycle may run the command, else why not."""
    if cmd.type in READ_ONLY_CREATE or (effect == "read" and cmd.type not in READ_ONLY_EXCLUDED):
        return None
    if cmd.type == "tasks.update":
        target = cmd.args.get("id", cmd.args.get("task_id"))
        if str(target) == str(task_id):
            return None
        return (
            f"a read-only task cycle may edit only its own task ({task_id}), not task {target}; "
            "propose the change to the main loop with notes.add"
        )
    return (
        f"{cmd.type} would change records a read-only task cycle may not touch; "
        "propose it to the main loop with notes.add"
    )


SIMULATED = {"external": "reach outside me", "modify_self": "change who I am"}  # not run in a simulation thread


def _thread_origin(services: Services, state: TickState, house: Managers) -> str | None:
    thread = services.reads.get(
        state.thread_id, state.tick, ("thread", state.thread_id), lambda: house.threads.get(state.thread_id)
    )
    return thread.origin if thread is not None else None


def end_simulation(services: Services, state: TickState) -> dict[str, Any] | None:
    """A task rehearsed in a simulated environment for `reflexes.simulation_ticks` thoughts: its thread closes with a
    chronicle (the parent's anchor shows it) and the ticks return to the parent. The event, or None."""
    known = services.reads.peek(state.thread_id, state.tick, ("thread", state.thread_id))  # as s01 read it
    if known is not None and known.origin != SIMULATION:  # (a thread's origin never changes): no rehearsal to end
        return None
    thoughts = services.settings.reflexes.simulation_ticks
    with services.managers.unit() as house:
        ended = house.threads.rehearsal_done(state.thread_id, thoughts)
    if ended is None:
        return None
    result = close_thread(services, ended.thread_id, status="completed")
    with services.managers.unit() as house:
        house.threads.back_from_rehearsal(ended, root_id=state.root_thread or ended.parent_id, thoughts=thoughts)
    return {
        "event": "stelis_leave",
        "thread_id": result.thread_id,
        "label": ended.label,
        "status": "completed",
        "origin": SIMULATION,
    }


def _failure_message(exc: Exception) -> str:
    if isinstance(exc, (CommandError, LookupError, ValueError)):  # bad arguments, unknown ids, limits
        return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)  # str(KeyError) is quoted
    log.exception("command failed")
    return f"{type(exc).__name__}: {exc}"


def _context(
    house: Managers,
    services: Services,
    commands: Registry,
    state: TickState,
    thread_id: str,
    task_id: int | None,
    llm_id: str | None,
    audience: Audience = ALONE,
) -> CommandContext:
    return CommandContext(
        house=house,
        thread_id=thread_id,
        tick=state.tick,
        llm_id=llm_id,
        settings=services.settings,
        now=services.clock(),
        services=services,
        root_thread=state.root_thread or thread_id,
        task_id=task_id,
        registry=commands,
        audience=audience,
    )


def out_of_scope(spec: CommandSpec, effect: str, audience: Audience) -> str | None:
    """Why a read command does not run while the tick answers a guest or a peer (None: it runs): only the reads
    that show what is theirs or shareable do (`CommandSpec.scoped`, managers/audience.py)."""
    if effect != "read" or spec.scoped or audience.private:
        return None
    return (
        f"not run while I answer {audience.describe()}: {spec.type} reads what only my owner may see; "
        "memory.search shows what is ours or shareable"
    )


def after_commit(actions: list[Callable[[], None]]) -> None:
    """What a command asked to do once its effect committed (start a background process); a failure is logged."""
    for action in actions:
        try:
            action()
        except Exception:  # noqa: BLE001 - the command's record stands; the job's row says it never started
            log.exception("after-commit action failed")


def _stranger(spec: CommandSpec, cmd: Command, ctx: CommandContext, state: TickState) -> str | None:
    """For a command that speaks as the persona from a tick with untrusted text: whom it speaks to, when that is
    nobody who wrote in the tick (the notes it showed) or wrote the untrusted text; else None (a reply)."""
    if spec.relay is None or not state.untrusted:
        return None
    return ctx.managers.consent.stranger(spec.relay(cmd, ctx), state.untrusted, state.incoming_note_ids)


def run_one(
    cmd: Command,
    state: TickState,
    services: Services,
    commands: Registry,
    llm_id: str | None,
    refusal_before_gate: tuple[str, str] | None = None,
) -> tuple[ExecutedCommand, list[dict[str, Any]]]:
    thread_id = state.thread_id
    key = f"{thread_id}:{state.tick}:{cmd.cmd_id}"
    base: ExecutedCommand = {"cmd_id": cmd.cmd_id, "type": cmd.type}
    call = CommandCall(
        cmd_key=key,
        thread_id=thread_id,
        tick=state.tick,
        cmd_id=cmd.cmd_id,
        type=cmd.type,
        args=cmd.args,
        description=cmd.description,
    )
    spec = commands.get(cmd.type)
    if spec is None and refusal_before_gate is None:
        refusal_before_gate = ("unknown", f"unknown command type {cmd.type!r}; see help.show")
    now = services.clock()
    try:
        with services.managers.unit() as house:
            done = house.consent.outcome(key)
            if done is not None:
                return {**base, "status": done.status, "result": done.result or "", "already_done": True}, []
            if refusal_before_gate is not None:  # unknown type or bad arguments (nodes/commands/admission.py)
                status, message = refusal_before_gate
                house.consent.refused(call, status, message)
                return {**base, "status": status, "result": message}, []
            assert spec is not None
            off = spec.off_because(services.settings)
            if off:
                message = f"{cmd.type} is off: {off}"
                house.consent.refused(call, "refused", message)
                return {**base, "status": "refused", "result": message}, []
            task = house.tasks.in_cycle(thread_id)
            effect = spec.effect_for(cmd.args)
            refusal = (
                read_only_refusal(cmd, effect, task.id) if task is not None and task.repl_mode == "read_only" else None
            )
            if refusal is None and effect in SIMULATED and _thread_origin(services, state, house) == SIMULATION:
                refusal = (
                    f"simulated, not run: {cmd.type} would {SIMULATED[effect]}, and this thread is a rehearsal "
                    "in a simulated environment (nothing leaves it)"
                )
            audience = Audience.from_dict(dict(state.audience))
            if refusal is None:
                refusal = out_of_scope(spec, effect, audience)
            if refusal:
                house.consent.refused(call, "refused", refusal)
                return {**base, "status": "refused", "result": refusal}, []
            ctx = _context(
                house,
                services,
                commands,
                state,
                thread_id,
                task.id if task is not None else None,
                llm_id,
                audience,
            )
            consent = ctx.managers.consent
            verdict = consent.decide(
                spec.asked(cmd.args), dict(state.validation), state.untrusted, _stranger(spec, cmd, ctx, state)
            )
            if verdict.action == "block":
                status = consent.blocked(verdict, call, now=now)
                return {**base, "status": status, "result": verdict.reason}, []
            if verdict.action == "park":
                approval_id, created, message = consent.parked_command(
                    verdict, call, root_thread=state.root_thread or thread_id, now=now
                )
                return {**base, "status": "pending_approval", "result": message, "approval_id": approval_id}, [
                    {
                        "event": "approval",
                        "approval_id": approval_id,
                        "type": cmd.type,
                        "args": cmd.args,
                        "reason": verdict.reason,
                        "new": created,
                        "tick": state.tick,
                    }
                ]
            with consent.tracked(state.untrusted, thread_id=thread_id, tick=state.tick) as read:
                result: CommandResult = spec.handler(cmd, ctx)
            if result.show:  # a result read for a guest or a peer is shown again only while answering them
                consent.show_result(
                    cmd.type,
                    result.output,
                    thread_id=result.thread_id or thread_id,
                    sources=result.sources,
                    read=read,
                    tag=audience.tag,
                )
            consent.ran(verdict, call, status=result.status, output=result.output, now=now)
            committed = ctx.after_commit
            outcome: tuple[ExecutedCommand, list[dict[str, Any]]] = (
                {**base, "status": result.status, "result": result.output},
                ctx.events,
            )
        after_commit(committed)
        return outcome
    except IntegrityError:  # another process committed the same cmd_key first
        return {**base, "status": "executed", "result": "already executed", "already_done": True}, []
    except Exception as exc:  # handler failed: its effect was rolled back with the transaction
        message = _failure_message(exc)
        with services.managers.unit() as house:
            house.consent.failed(call, message)
        return {**base, "status": "failed", "result": message}, []


NOT_RUN = ("failed", "unknown", "invalid", "refused", "blocked", "unvalidated", "pending_approval", "withdrawn")


def _withdrawn(state: TickState) -> str | None:
    """Why this tick's commands do not run when the model flagged this very thought as a reasoning error (HMP
    `self_error`: managers/thoughts.py), else None."""
    for raw in state.commands:
        if (
            raw.get("type") == SELF_ERROR
            and not raw.get("error")
            and flags_this_thought(raw.get("args") or {}, state.tick)
        ):
            reason = str((raw.get("args") or {}).get("reason") or "")[:300]
            return f"withdrawn: I flagged this thought's reasoning as an error ({reason})"
    return None


FEEDBACK_LINES = 12


def what_went_wrong(parse_errors: list[str], executed: list[ExecutedCommand]) -> str:
    """One entry for the next tick's process log: what could not be read, and every command that did not run, why."""
    lines = [f"reading my output: {error}" for error in parse_errors]
    lines += [
        f"{e['type']} ({e['cmd_id']}) {e['status']}: {e['result']}"
        for e in executed
        if e.get("status") in NOT_RUN and not e.get("already_done")
    ]
    if len(lines) > FEEDBACK_LINES:
        lines = lines[:FEEDBACK_LINES] + [f"… and {len(lines) - FEEDBACK_LINES} more"]
    return "\n".join(line[:400] for line in lines)


class _LostRace(Exception):
    """Another process ran this approval first: roll back."""


def run_approved(
    state: TickState, services: Services, commands: Registry
) -> tuple[list[ExecutedCommand], list[dict[str, Any]]]:
    """Commands the human approved since they were parked: each runs once, in the transaction that marks it executed."""
    root = state.root_thread or state.thread_id
    with services.managers.reading() as house:  # each approved command runs in its own unit below
        approved = house.consent.approved_waiting(root)
    outcomes: list[ExecutedCommand] = []
    events: list[dict[str, Any]] = []
    for approval_id in approved:
        now = services.clock()
        try:
            with services.managers.unit() as house:
                row = house.consent.approved_command(approval_id)
                if row is None:  # approvals are never deleted: nothing left to run
                    continue
                spec = commands.get(row.type)
                if spec is None:
                    raise CommandError(f"{row.type} no longer exists")
                cmd = Command(
                    cmd_id=row.cmd_id, type=row.type, args=spec.check(dict(row.args)), description=row.description
                )  # parked by an older version: checked again
                ctx = _context(house, services, commands, state, row.thread_id, None, None)
                result = spec.handler(cmd, ctx)
                if not ctx.managers.consent.executed_on_approval(
                    row, result.output, status=result.status, tick=state.tick, now=now
                ):
                    raise _LostRace()
                outcomes.append(
                    {
                        "cmd_id": row.cmd_id,
                        "type": row.type,
                        "status": result.status,
                        "result": result.output,
                        "approval_id": row.id,
                    }
                )
                events += ctx.events
                committed = ctx.after_commit
            after_commit(committed)
        except _LostRace:
            continue
        except Exception as exc:  # the effect rolled back; the approval is closed as failed, and the persona told
            message = _failure_message(exc)
            with services.managers.unit() as house:
                row = house.consent.approved_command(approval_id)
                if row is None:
                    continue
                house.consent.failed_on_approval(row, message, tick=state.tick, now=now)
            outcomes.append(
                {
                    "cmd_id": row.cmd_id,
                    "type": row.type,
                    "status": "failed",
                    "result": message,
                    "approval_id": approval_id,
                }
            )
    return outcomes, events


def execute_commands(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> ExecutionUpdate:
    services = services_of(runtime)
    commands = registry()
    executed, events = run_approved(state, services, commands)
    llm_id = state.llm.get("llm_id")
    sent_first = {e["cmd_id"]: e for e in state.executed if not e.get("already_done")}  # by send_answer, this tick
    withdrawn = _withdrawn(state)
    for raw in state.commands:
        if raw.get("cmd_id") in sent_first:
            executed.append(sent_first[raw["cmd_id"]])
            continue
        refusal = (raw.get("status") or "invalid", raw["error"]) if raw.get("error") else None
        if refusal is None and withdrawn and raw.get("type") != SELF_ERROR:
            refusal = ("withdrawn", withdrawn)
        outcome, produced = run_one(Command.model_validate(raw), state, services, commands, llm_id, refusal)
        executed.append(outcome)
        events += produced
    left = end_simulation(services, state)
    if left is not None:
        events.append(left)
    thought_sources = provenance.own(state.untrusted)
    if state.response_id is not None and thought_sources:  # the thought keeps what its tick read
        with services.managers.unit() as house:
            house.consent.thought_written_from(
                state.response_id, thought_sources, thread_id=state.thread_id, tick=state.tick, now=services.clock()
            )
    for event in events:
        runtime.stream_writer(event)
    if executed:
        services.sync_memory()
    with services.managers.unit() as house:
        house.loop.close_tick(
            state.thread_id,
            state.tick,
            status="degraded" if state.degraded else "ok",
            summary={
                "commands": [{"cmd_id": e["cmd_id"], "type": e["type"], "status": e["status"]} for e in executed],
                "parse_errors": state.parse_errors,
                "novelty": state.novelty.get("novelty_score"),
                "stagnation": bool(state.novelty.get("stagnation_flag")),
                "rating": state.validation.get("rating"),
                "auto_pass": state.validation.get("auto_pass"),
                "emotions": state.emotions,
                "context": state.context_report,
                "error": state.error,
                "drives": {k: state.drives.get(k) for k in ("levels", "dominant", "reach_out")}
                if state.drives.get("levels")
                else None,
            },
            feedback=what_went_wrong(state.parse_errors, executed),
        )
        # what ran may have changed the cycle; otherwise it is as prepare_context read it
        cycle = services.reads.peek(state.thread_id, state.tick, CYCLE) if not executed else None
        if cycle is None:
            cycle = house.loop.cycle(state.thread_id)
    chosen = cycle.pause_s  # cycle.pause (per thread) wins over config.yaml's cycle.pause_s
    pause_s = max(
        float(services.settings.cycle.pause_s if chosen is None else chosen),
        float(state.stagnation.get("pause_s") or 0.0),
    )
    return {"executed": executed, "pause_s": pause_s, "idle": cycle.idle is not None}
