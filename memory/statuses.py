"""The states a row goes through, one enumeration per status column (the stored values are these strings, as older
databases hold them). A writer names a member; a reader may compare with either (a StrEnum is its string)."""

from __future__ import annotations

from enum import StrEnum


class ThreadStatus(StrEnum):  # threads.status
    RUNNING = "running"
    COMPLETED = "completed"
    ABORTED = "aborted"


class TickStatus(StrEnum):  # ticks.status
    RUNNING = "running"
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"


class ProcessStatus(StrEnum):  # process_log.status: what the next prompt shows of a process
    OK = "ok"
    WARNING = "warning"
    ERROR = "error"
    TIMEOUT = "timeout"
    OFFLINE = "offline"
    CLOSE = "close"
    IN_PROGRESS = "in_progress"


class RunStatus(StrEnum):  # process_runs.status: a background job
    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    KILLED = "killed"
    OFFLINE = "offline"


class CommandStatus(StrEnum):  # executed_commands.status
    EXECUTED = "executed"
    FAILED = "failed"
    UNVALIDATED = "unvalidated"
    BLOCKED = "blocked"
    REFUSED = "refused"
    PENDING_APPROVAL = "pending_approval"


class GoalStatus(StrEnum):  # goals.status
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"


class TaskStatus(StrEnum):  # tasks.status
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    FROZEN = "frozen"


class CycleStatus(StrEnum):  # tasks.repl_status: a task's sub-cycle
    RUNNING = "running"
    STOPPED = "stopped"
    ERROR = "error"


class QuestionStatus(StrEnum):  # open_questions.status
    OPEN = "open"
    RESOLVED = "resolved"


class SessionStatus(StrEnum):  # sessions.status
    RUNNING = "running"
    STOPPED = "stopped"
    KILLED = "killed"


class ApprovalStatus(StrEnum):  # approvals.status
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXECUTED = "executed"
    FAILED = "failed"
    EXPIRED = "expired"


CLOSED_TASK = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)
BEFORE_RUN_ENDS = (RunStatus.PENDING, RunStatus.RUNNING)


__all__ = [
    "BEFORE_RUN_ENDS",
    "CLOSED_TASK",
    "ApprovalStatus",
    "CommandStatus",
    "CycleStatus",
    "GoalStatus",
    "ProcessStatus",
    "QuestionStatus",
    "RunStatus",
    "SessionStatus",
    "TaskStatus",
    "ThreadStatus",
    "TickStatus",
]
