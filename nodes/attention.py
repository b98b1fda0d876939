"""A human waiting comes first (DESIGN.md §9): what the tick's steps ask before a model call that is the persona's
own work, and what cuts such a call short when someone writes.

- `waiting(services, exclude)`: a human's note is unread — other than the ones this tick answers (`exclude`). One
  indexed query (managers/conversation.py `waiting`).
- `side_call(services, exclude, call, skipped)`: a model call besides the thought (the reflexes' evaluation,
  validators, a rephrase, an abstract, a day's summary, the drives' reading of a note): not started while a human
  waits, and cut if one writes while it runs — `skipped` is returned instead, and the step goes on without it.
- `cut_when_a_human_writes(services, exclude)`: around a free thought's model call (s05): the call is cancelled
  the moment a human's note waits (looked for every `POLL_S`), and `Cut.by_human` tells the step it was not the
  loop's stop. The registry's cancel for this thread (llm/registry.py `cancel_here`: a background question to
  another model in another thread goes on) stops the embedded model between two tokens and walks away from a
  server's request (a server that cannot cancel finishes it for nobody: its result is set aside).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from llm import LLMCancelled

log = logging.getLogger(__name__)
POLL_S = 0.25  # how often a running call looks for a human's note (one indexed query): a cut comes this late at most
FRESH_S = 0.5  # a tick's steps that ask within this share one answer
T = TypeVar("T")


def waiting(services: Any, exclude: Collection[int] = (), tick: tuple[str, int] | None = None) -> bool:
    """Whether a human's note waits (unread, and not one of `exclude`). With `tick` (thread, tick number), the
    answer is shared by the tick's steps that ask within the same FRESH_S (one query for several quick steps)."""

    def look() -> bool:
        with services.db.reading() as repos:
            return bool(services.managers.over(repos).conversation.waiting(exclude))

    if tick is None:
        return look()
    moment = int(time.monotonic() / FRESH_S)
    return bool(services.reads.get(tick[0], tick[1], ("human_waiting", frozenset(exclude), moment), look))


@dataclass
class Cut:
    by_human: bool = False


@contextmanager
def cut_when_a_human_writes(services: Any, exclude: Collection[int] = ()) -> Iterator[Cut]:
    """Inside, the model calls are cancelled (LLMCancelled) as soon as a human's note other than `exclude` waits, or
    the loop stops; `Cut.by_human` says which."""
    cut = Cut()
    llms = services.llms
    either = threading.Event()  # this thread's: a background job's model call elsewhere goes on
    done = threading.Event()
    ignore = frozenset(exclude)

    def watch() -> None:
        while not done.wait(POLL_S):
            try:
                if waiting(services, ignore):
                    cut.by_human = True
                    either.set()
                    return
            except Exception:  # noqa: BLE001 - a failed look is tried again at the next poll
                log.exception("looking for a human's note failed")

    watcher = threading.Thread(target=watch, name="human-watch", daemon=True)
    watcher.start()
    try:
        with llms.cancel_here(either):
            yield cut
    finally:
        done.set()
        watcher.join(timeout=POLL_S * 8)


def side_call(
    services: Any,
    exclude: Collection[int],
    call: Callable[[], T],
    skipped: T,
    what: str,
    tick: tuple[str, int] | None = None,
) -> T:
    """`call()` (which asks a model) unless a human waits; cut if one writes meanwhile — then `skipped`."""
    if waiting(services, exclude, tick):
        log.info("%s not asked: a human's note waits", what)
        return skipped
    with cut_when_a_human_writes(services, exclude) as cut:
        try:
            return call()
        except LLMCancelled:
            if not cut.by_human:
                raise
    log.info("%s cut: a human's note came", what)
    return skipped


__all__ = ["POLL_S", "Cut", "cut_when_a_human_writes", "side_call", "waiting"]
