"""What the tick's services are to the code that uses them: Protocols of the members `Services` carries
(nodes/context.py), so a step is checked against what it calls, not against a class it never imports.

- `RecallIndex`: what the steps, reflexes and loops use of the retrieval index (memory/retrieval/recall_index.py).
- `BackgroundJobs`: the jobs that outlive a tick (nodes/background.py `Background` is one).
"""

from __future__ import annotations

from typing import Protocol

from memory.retrieval.recall_index import RecallIndex


class BackgroundJobs(Protocol):
    """Scripts and questions to other models that run beside the ticks, each a `runs` row."""

    def launch(self, run_id: int) -> None: ...

    def stop(self, run_id: int) -> bool: ...

    def recover(self) -> dict[str, int]: ...

    def running(self) -> int: ...

    def wait_idle(self, timeout_s: float) -> bool: ...

    def kill_all(self) -> None: ...


__all__ = ["BackgroundJobs", "RecallIndex"]
