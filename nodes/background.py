"""Background jobs that outlive the tick that started them: scripts in their sandbox (`process.start`) and questions
to another registered model (`llm_task`). Each is a `process_runs` row behind a `process_log` row.

A command records the job (status pending) in its own transaction; once that commits, `launch` starts it on a
thread of its own. The job's process_log row is `in_progress` while it runs; when it ends the row says how (ok,
error, timeout, warning for a stop), so the next prompt shows the result — fenced as data — and then closes it,
and an idle loop wakes (`finished_since`, nodes/commands/cycle.py). At start-up `recover` starts the jobs a dead
process recorded but never started, and marks those it left running `offline` (HMP's status). When the process
exits, its running scripts are killed with it. A script runs jailed (reach/sandbox.py), with the network only
when the operator lists it in `scripts.network`; without a working jail it does not run, and its row says why.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from managers.owners import owner_alive, process_token
from reach import budget
from reach.sandbox import JailUnavailable, Limits, kill_group, start, wait

log = logging.getLogger(__name__)
SANDBOX_DIR = "sandbox"


class Background:
    def __init__(self, services: Any):
        self.services = services
        self._lock = threading.Lock()
        self._threads: dict[int, threading.Thread] = {}
        self._procs: dict[int, Any] = {}
        self._stopping: set[int] = set()
        self._exit_hook = False

    # -- starting ------------------------------------------------------------------------------------------------

    def launch(self, run_id: int) -> None:
        with self.services.managers.reading() as house:
            run = house.processes.run(run_id)
        if run.status != "pending":
            return
        kind = run.kind
        target = {"script": self._run_script, "llm_task": self._run_llm_task}[kind]
        thread = threading.Thread(target=self._guarded, args=(target, run_id), name=f"anima-job-{run_id}", daemon=True)
        with self._lock:
            self._threads[run_id] = thread
        thread.start()

    def _guarded(self, target: Callable[[int], None], run_id: int) -> None:
        try:
            target(run_id)
        except Exception as exc:  # noqa: BLE001 - a job that breaks says so in its row, never elsewhere
            log.exception("background job %s failed", run_id)
            self._finish(run_id, "error", f"{type(exc).__name__}: {exc}", None)
        finally:
            with self._lock:
                self._threads.pop(run_id, None)
                self._procs.pop(run_id, None)
                self._stopping.discard(run_id)

    def _finish(self, run_id: int, status: str, text: str, exit_code: int | None) -> None:
        with self.services.managers.unit() as house:
            house.processes.run_finished(run_id, status, text, exit_code, self.services.clock())

    # -- scripts ---------------------------------------------------------------------------------------------------

    def workdir(self, run_id: int) -> Path:
        return Path(self.services.settings.data_dir).expanduser().resolve() / SANDBOX_DIR / f"run-{run_id}"

    def _run_script(self, run_id: int) -> None:
        with self.services.managers.reading() as house:
            run = house.processes.run(run_id)
            script = house.processes.script_of(run)
            language, code, name = script.language, script.code, script.name
        spec = run.spec
        limits = Limits(
            timeout_s=float(spec["timeout_s"]), memory_mb=int(spec["memory_mb"]), output_chars=int(spec["output_chars"])
        )
        workdir = self.workdir(run_id)
        config = self.services.settings.scripts
        network = config.jail == "none" or name in config.network  # the operator's choice, read when it runs
        started = time.monotonic()
        try:
            proc = start(
                language,
                code,
                [str(a) for a in spec.get("args") or []],
                workdir,
                limits,
                network=network,
                jail=config.jail,
            )
        except JailUnavailable as exc:
            self._finish(run_id, "error", f"script {name} did not run: {exc}", None)
            return
        with self._lock:
            self._procs[run_id] = proc
        self._kill_on_exit()
        with self.services.managers.unit() as house:
            house.processes.run_started(
                run_id,
                pid=proc.pid,
                owner=process_token(),
                workdir=str(workdir),
                now=self.services.clock(),
                said=f"script {name} running (pid {proc.pid}, at most {limits.timeout_s:g} s)",
            )
        outcome = wait(proc, workdir, limits, started)
        status = "killed" if run_id in self._stopping else outcome.status
        how = {
            "ok": "finished",
            "error": f"failed (exit code {outcome.exit_code})",
            "timeout": f"was stopped at its time limit of {limits.timeout_s:g} s",
            "killed": "was stopped",
        }[status]
        offline = "" if network else " (it had no network: the operator allows it per script, scripts.network)"
        text = f"script {name} {how} after {outcome.seconds:g} s{offline}; output:\n{outcome.output or '(none)'}"
        self._finish(run_id, status, text, outcome.exit_code)

    def stop(self, run_id: int) -> bool:
        """Stop a running script (its whole process group); True when there was one to stop."""
        with self._lock:
            proc = self._procs.get(run_id)
            self._stopping.add(run_id)
        if proc is not None:
            return kill_group(proc.pid)
        with self.services.managers.reading() as house:  # started by another process of this persona
            run = house.processes.run(run_id)
        return run.pid is not None and run.status == "running" and kill_group(run.pid)

    def _kill_on_exit(self) -> None:
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(self.kill_all)

    def kill_all(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc.pid)

    # -- a question to another model --------------------------------------------------------------------------

    def _run_llm_task(self, run_id: int) -> None:
        from llm import AllLLMsUnavailable, Sampling

        with self.services.managers.unit() as house:
            run = house.processes.run(run_id)
            house.processes.run_started(
                run_id,
                pid=None,
                owner=process_token(),
                workdir=None,
                now=self.services.clock(),
                said=f"{run.spec['llm']} is thinking about: {budget(run.spec['question'], 200)}",
            )
        spec, thread_id = run.spec, run.thread_id
        messages = [
            {"role": "system", "content": spec.get("system") or "Answer the question fully and plainly."},
            {"role": "user", "content": spec["question"]},
        ]
        try:
            generation = self.services.llms.generate(
                "llm_task",
                messages=messages,
                only=spec["llm"],
                sampling=Sampling(max_tokens=int(spec.get("max_tokens") or 512), temperature=0.7),
                tags={"thread_id": thread_id},
            )
        except AllLLMsUnavailable as exc:
            self._finish(run_id, "error", f"{spec['llm']} did not answer: {exc}", None)
            return
        answer = generation.text.strip() or "(an empty answer)"
        with self.services.managers.unit() as house:
            house.processes.model_answered(
                run_id, answer, completion_tokens=generation.completion_tokens, now=self.services.clock()
            )

    # -- bookkeeping -----------------------------------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """At start-up: jobs recorded but never started run now; jobs a dead process left running are offline."""
        started = 0
        with self.services.managers.unit() as house:
            pending, offline = house.processes.recover(process_token(), owner_alive, kill_group, self.services.clock())
        for run_id in pending:
            self.launch(run_id)
            started += 1
        return {"started": started, "offline": offline}

    def running(self) -> int:
        with self._lock:
            return len(self._threads)

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no job runs in this process (tests, a clean stop); False when time ran out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                threads = list(self._threads.values())
            if not threads:
                return True
            threads[0].join(timeout=max(0.0, deadline - time.monotonic()))
        return self.running() == 0
