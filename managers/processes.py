"""Scripts the persona writes (HMP `agent_scripts`: data until it runs one) and the processes behind its
process_log rows (HMP `process list/start/stop/mark/cleanup`).

A run leaves the process: it goes to a sandbox (reach/sandbox.py) on a background job that the door starts once its
transaction has committed (`StartedRun.run`); its process_log row is `pending` until then. Scripts are off unless
the operator turns them on (config.yaml `scripts.enabled`; `sh` only when listed in `scripts.languages`), and off
while the jail cannot run (no bwrap), unless the operator chose `scripts.jail: none`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from managers.errors import Refused
from memory import provenance
from memory.note_kinds import NoteSource
from memory.statuses import BEFORE_RUN_ENDS, ProcessStatus, RunStatus
from reach import budget
from reach.sandbox import jail_problem

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import AgentScript, ProcessLog, ProcessRun
    from persona.settings import ScriptSettings, Settings

RUNNING = BEFORE_RUN_ENDS  # a run's states before it ends


def scripts_off(settings: Any) -> str | None:
    """Why no script can run with these settings (None: they can)."""
    if not settings.scripts.enabled:
        return "scripts are off (the operator turns them on: config.yaml scripts.enabled)"
    if settings.scripts.jail == "bwrap":  # fail closed: no jail, no run (tried once per process)
        return jail_problem()
    return None


@dataclass(frozen=True)
class SavedScript:
    script: AgentScript
    rewritten: bool  # it replaced a script of that name
    enabled: bool  # its language is one the operator enabled (else it is kept but cannot run)


@dataclass(frozen=True)
class StartedRun:
    process: ProcessLog  # its process_log row (pending until the background job starts it)
    run: ProcessRun  # the job to launch once the transaction has committed
    script: AgentScript
    timeout_s: float
    memory_mb: int
    network: bool  # whether the run may use the network


@dataclass(frozen=True)
class RunView:
    """A background job as its runner sees it (a `process_runs` row behind a `process_log` row)."""

    id: int
    kind: str  # script | llm_task
    status: str
    spec: dict[str, Any]
    thread_id: str | None
    process_id: int
    pid: int | None


# how a job ended → its process_log status (a stop is a warning; a job its dead process left is offline)
PROCESS_STATUS: dict[str, ProcessStatus] = {
    RunStatus.OK: ProcessStatus.OK,
    RunStatus.ERROR: ProcessStatus.ERROR,
    RunStatus.TIMEOUT: ProcessStatus.TIMEOUT,
    RunStatus.KILLED: ProcessStatus.WARNING,
    RunStatus.OFFLINE: ProcessStatus.OFFLINE,
}


class ProcessManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.deps = house.deps

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def config(self) -> ScriptSettings:
        return self.settings.scripts

    # -- scripts -----------------------------------------------------------------------------------------------------

    def scripts(self) -> list[AgentScript]:
        return self.repos.scripts.list()

    def script(self, name: str) -> AgentScript:
        """The active script of that name (NotFound otherwise)."""
        return self.repos.scripts.get(name)

    def save_script(
        self, *, name: str, language: str, code: str, description: str = "", replace: bool = False
    ) -> SavedScript:
        """Store the script (not run). Refused when the code is over `scripts.max_code_chars`, or when a script of
        that name exists and `replace` is not set."""
        limit = self.config.max_code_chars
        if len(code) > limit:
            raise Refused(f"the code is {len(code):,} characters; at most {limit:,}")
        try:
            existing: AgentScript | None = self.repos.scripts.get(name)
        except LookupError:
            existing = None
        if existing is not None and not replace:
            raise Refused(f'I have a script {name!r} already; {{"replace": true}} rewrites it')
        script, _ = self.repos.scripts.save(name, language, code, description)
        return SavedScript(script, rewritten=existing is not None, enabled=language in self.config.languages)

    def archive_script(self, name: str) -> AgentScript:
        script = self.repos.scripts.get(name)
        self.repos.scripts.archive(script.id)
        return script

    # -- processes ---------------------------------------------------------------------------------------------------

    def start(
        self,
        *,
        script: str,
        args: list[str],
        thread_id: str,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        llm_id: str | None = None,
        task_id: int | None = None,
    ) -> StartedRun:
        """A run of the script, recorded and waiting for its background job (the door launches `run` after commit).
        Refused when its language is not enabled or `scripts.max_running` runs are running; the limits are cut to
        the operator's maximums."""
        config = self.config
        row = self.repos.scripts.get(script)
        if row.language not in config.languages:
            raise Refused(
                f"{row.language} scripts are not enabled here "
                f"(config.yaml scripts.languages: {', '.join(config.languages)})"
            )
        running = len(self.repos.runs.with_status(*RUNNING))
        if running >= config.max_running:
            raise Refused(f"{running} of at most {config.max_running} processes are running already")
        timeout = min(float(config.timeout_s if timeout_s is None else timeout_s), config.max_timeout_s)
        memory = min(int(config.memory_mb if memory_mb is None else memory_mb), config.max_memory_mb)
        process = self.repos.processes.add(
            f"process:{row.name}",
            f"script {row.name} waits to start",
            status="pending",
            thread_id=thread_id,
            tags=["background", "script"],
            llm_id=llm_id,
            task_id=task_id,
        )
        run = self.repos.runs.add(
            process.id,
            "script",
            thread_id=thread_id,
            script_id=row.id,
            spec={
                "script": row.name,
                "args": list(args),
                "timeout_s": timeout,
                "memory_mb": memory,
                "output_chars": config.output_chars,
            },
        )
        row.runs = int(row.runs or 0) + 1
        network = config.jail == "none" or row.name in config.network
        return StartedRun(process, run, row, timeout, memory, network)

    def listing(
        self, thread_id: str, *, open_only: bool = True, limit: int = 10
    ) -> list[tuple[ProcessLog, ProcessRun | None]]:
        """The thread's processes (the open ones, or every recent one), each with its background run if it has one."""
        return [
            (p, self.repos.runs.of_process(p.id))
            for p in self.repos.processes.listing(thread_id, open_only=open_only, limit=limit)
        ]

    def stop(self, process_id: int) -> tuple[ProcessRun, bool]:
        """The script run behind the process and whether it is still running (the door stops it after commit).
        Refused when the process is not a script run."""
        run = self.repos.runs.of_process(process_id)
        if run is None or run.kind != "script":
            raise Refused(f"process {process_id} is not a script I started")
        return run, run.status in RUNNING

    def mark(self, process_id: int, status: str) -> ProcessLog:
        """Mark a process as dealt with; Refused for an unknown process or one still running."""
        row = self.repos.processes.get(process_id)
        if row is None:
            raise Refused(f"no process {process_id}")
        if row.status in ("in_progress", "pending"):
            raise Refused(f"process {process_id} is still running (process.stop stops it)")
        return self.repos.processes.set_status(process_id, status, now=self.deps.clock())

    def cleanup(self, *, days: float) -> int:
        """Forget closed processes (and their runs) last changed more than `days` ago; how many."""
        ids = self.repos.processes.delete_closed(self.deps.clock() - timedelta(days=days))
        self.repos.runs.delete_for(ids)
        return len(ids)

    # -- the background jobs' rows (nodes/background.py runs them) --------------------------------------------------

    def run(self, run_id: int) -> RunView:
        r = self.repos.runs.get(run_id)
        return RunView(r.id, r.kind, r.status, dict(r.spec or {}), r.thread_id, r.process_id, r.pid)

    def script_of(self, run: RunView) -> AgentScript:
        """The script a run runs (archived since, it still runs)."""
        return self.repos.scripts.get(run.spec["script"], include_archived=True)

    def run_started(
        self, run_id: int, *, pid: int | None, owner: str, workdir: str | None, now: datetime, said: str
    ) -> RunView:
        """The job runs (its process_log row `in_progress`, saying `said`)."""
        run = self.run(run_id)
        self.repos.runs.started(run_id, pid=pid, owner=owner, workdir=workdir, now=now)
        self.repos.processes.set_status(run.process_id, "in_progress", said)
        return run

    def run_finished(self, run_id: int, status: str, text: str, exit_code: int | None, now: datetime) -> bool:
        """How the job ended, on its rows (a script's output is untrusted text: what it read, fetched); False when it
        had ended already."""
        run = self.run(run_id)
        if run.status not in RUNNING:
            return False
        self.repos.runs.finished(run_id, status, output=text, exit_code=exit_code, now=now)
        script = run.spec.get("script")
        self.repos.processes.set_status(
            run.process_id,
            PROCESS_STATUS.get(status, ProcessStatus.ERROR),
            text,
            now,
            sources=[provenance.source("script", f"script {script} (run {run_id})", text)] if script else None,
        )
        return True

    def model_answered(self, run_id: int, answer: str, *, completion_tokens: int | None, now: datetime) -> bool:
        """Another model's answer to the persona's question: a note (its data) and the job done; False when the job
        had ended meanwhile (stopped)."""
        run = self.run(run_id)
        if run.status != "running":
            return False
        llm, question = run.spec["llm"], run.spec["question"]
        note = self.repos.notes.add(
            f"{llm} answers my question “{budget(question, 300)}”:\n{answer}",
            source=NoteSource.OTHER_MODEL,
            tags=["llm_task", f"llm:{llm}"],
            thread_id=run.thread_id,
            llm_id=llm,
            created_at=now,
        )
        self.repos.runs.finished(run_id, "ok", output=answer, exit_code=None, now=now)
        self.repos.processes.set_status(
            run.process_id, "ok", f"{llm} answered (note {note.id}, {completion_tokens} tokens)", now
        )
        return True

    def recover(
        self, token: str, alive: Callable[[str | None], bool], kill: Callable[[int], Any], now: datetime
    ) -> tuple[list[int], int]:
        """At start-up: (the jobs recorded but never started, how many a dead process left running — marked
        offline, their process group killed)."""
        pending = [r.id for r in self.repos.runs.with_status("pending")]
        offline = 0
        for run in self.repos.runs.with_status("running"):
            if run.owner == token or alive(run.owner):
                continue
            if run.pid:
                kill(run.pid)
            text = "the process that ran it stopped; its result is lost (start it again)"
            self.repos.runs.finished(run.id, "offline", output=text, exit_code=None, now=now)
            self.repos.processes.set_status(run.process_id, "offline", text, now)
            offline += 1
        return pending, offline


__all__ = ["PROCESS_STATUS", "RUNNING", "ProcessManager", "RunView", "SavedScript", "StartedRun", "scripts_off"]
