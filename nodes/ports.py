"""What the tick's services are to the code that uses them: Protocols of the members `Services` carries
(nodes/context.py), so a step is checked against what it calls, not against a class it never imports.

- `RecallIndex`: what the steps, reflexes and loops use of the retrieval index (memory/retrieval/index.py `MemoryIndex`
  is one; a test may give its own).
- `BackgroundJobs`: the jobs that outlive a tick (nodes/background.py `Background` is one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from memory.retrieval.index import Hit, Query


class RecallIndex(Protocol):
    """Hybrid retrieval over every memory tier, and the text embeddings the reflexes compare."""

    def search(self, query: Query | str, **kwargs: Any) -> list[Hit]: ...

    def diverse(self, refs: list[str], k: int, tier: str = "message") -> list[str]: ...

    def embed_texts(self, texts: list[str], cache_size: int = 512,
                    documents: Iterable[tuple[str, str, list[str]]] = ()) -> np.ndarray: ...

    def record_texts(self, text: str, author: str = "", title: str = "") -> tuple[str, str, list[str]]: ...

    def sync(self, progress: bool = False, flush: bool = False) -> int: ...

    def flush(self) -> int: ...

    def close(self) -> None: ...


class BackgroundJobs(Protocol):
    """Scripts and questions to other models that run beside the ticks, each a `runs` row."""

    def launch(self, run_id: int) -> None: ...

    def stop(self, run_id: int) -> bool: ...

    def recover(self) -> dict[str, int]: ...

    def running(self) -> int: ...

    def wait_idle(self, timeout_s: float) -> bool: ...

    def kill_all(self) -> None: ...
