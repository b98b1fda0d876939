"""What the code above memory uses of the retrieval index: `RecallIndex`, a Protocol (memory/retrieval/index.py
`MemoryIndex` is one; a test may give its own). The tick's services (nodes/context.py) and the managers
(managers/__init__.py: `ManagerDeps.memory`) are typed by it, not by the class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from memory.followup import FollowUp
    from memory.retrieval.index import Hit, Query


class RecallIndex(Protocol):
    """Hybrid retrieval over every memory tier, and the text embeddings the reflexes compare."""

    follow_up: FollowUp  # what follows a write, off the tick's path (memory/followup.py)

    def search(self, query: Query | str, **kwargs: Any) -> list[Hit]: ...

    def diverse(self, refs: list[str], k: int, tier: str = "message") -> list[str]: ...

    def embed_texts(
        self, texts: list[str], cache_size: int = 512, documents: Iterable[tuple[str, str, list[str]]] = ()
    ) -> np.ndarray: ...

    def record_texts(self, text: str, author: str = "", title: str = "") -> tuple[str, str, list[str]]: ...

    def sync(self, progress: bool = False, flush: bool = False) -> int: ...

    def flush(self) -> int: ...

    def close(self) -> None: ...
