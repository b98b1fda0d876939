"""The LLM registry: every configured model by priority, failover between them, call accounting.

Entries are plain dicts (from config, CLI or the `llm_registry` table):
`{id, provider, model, priority, is_validator, trust_score, config}`. Providers are built lazily, so
a fallback model costs nothing until it is needed. Every call, successful or not, is reported to
`recorder` (the graph wires it to the `llm_calls` table); this module imports nothing above llm/.

Whatever a provider raises ends as a recorded, classified failure (llm/base.py lists the kinds and what each
costs the model: a backoff or none) and a failover; when no model answers, `AllLLMsUnavailable` (the caller
degrades). The one exception is `LLMCancelled`: a stop was requested (`cancel_when`), and the caller stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from llm.base import (
    AUTH,
    BAD_REQUEST,
    ERROR,
    NOT_FOUND,
    RATE_LIMITED,
    AllLLMsUnavailable,
    Generation,
    LLMCancelled,
    LLMUnavailable,
    Provider,
    Sampling,
    TokenCallback,
)
from llm.tracing import answered, failed, model_call_span

Recorder = Callable[[dict[str, Any]], None]
log = logging.getLogger(__name__)


@dataclass
class _Slot:
    entry: dict[str, Any]
    provider: Provider | None = None
    down_until: float = 0.0
    failures: int = 0


class EitherEvent(threading.Event):
    """Set when it is set, or when any event it wraps is (the run's stop beside one thread's own reason to cancel).
    The providers only ask `is_set()` and `wait()`."""

    def __init__(self, *others: threading.Event) -> None:
        super().__init__()
        self.others = others

    def is_set(self) -> bool:
        return super().is_set() or any(event.is_set() for event in self.others)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            super().wait(0.05 if left is None else min(0.05, left))
        return True


@dataclass
class LLMRegistry:
    entries: list[dict[str, Any]]
    recorder: Recorder | None = None
    providers: dict[str, Provider] = field(default_factory=dict)  # pre-built (tests, shared models)
    backoff_s: float = 5.0
    max_backoff_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    cancel: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if not self.entries:
            raise ValueError("the LLM registry is empty: configure at least one model")
        self._all = {e["id"]: _Slot(entry=dict(e), provider=self.providers.get(e["id"])) for e in self.entries}
        self._selected: str | None = None
        self._here = threading.local()  # one thread's own cancel (cancel_here), beside the run's
        self._order()

    def _order(self) -> None:
        enabled = [s for s in self._all.values() if s.entry.get("enabled", True)]
        if not enabled:
            raise ValueError("every LLM of the registry is disabled: enable at least one")
        self._slots = {s.entry["id"]: s for s in sorted(enabled, key=lambda s: -int(s.entry.get("priority", 0)))}
        if self._selected not in self._slots:
            self._selected = None

    def apply(self, overrides: dict[str, dict[str, Any]], selected: str | None) -> None:
        """Run-time changes (llm_registry.update / select, the operator's `run.py llm` and Controls page): each
        entry's priority, enabled and is_validator as `overrides` say, then the primary model. A change that would
        leave no model enabled is refused (ValueError) and nothing changes."""
        before = {i: dict(s.entry) for i, s in self._all.items()}
        for llm_id, changes in overrides.items():
            if llm_id in self._all:
                self._all[llm_id].entry.update(
                    {k: v for k, v in changes.items() if k in ("priority", "enabled", "is_validator")}
                )
        try:
            self._order()
        except ValueError:
            for llm_id, entry in before.items():
                self._all[llm_id].entry = entry
            self._order()
            raise
        self._selected = selected if selected in self._slots else None

    def adopt(self, added: dict[str, dict[str, Any]]) -> None:
        """The models added at run time (Controls, `run.py llm add`), by id: a new one joins the registry, one no
        longer listed leaves it (only models added at run time come and go here; configured ones stay)."""
        for llm_id, entry in added.items():
            if llm_id not in self._all:
                self._all[llm_id] = _Slot(entry={**entry, "id": llm_id, "added": True})
        for llm_id in [i for i, s in self._all.items() if s.entry.get("added") and i not in added]:
            slot = self._all.pop(llm_id)
            close = getattr(slot.provider, "close", None)
            if callable(close):
                close()
        self._order()

    @property
    def known(self) -> list[str]:
        """Every registered model, enabled or not."""
        return list(self._all)

    @property
    def ids(self) -> list[str]:
        return list(self._slots)

    def select(self, llm_id: str | None) -> None:
        if llm_id is not None and llm_id not in self._slots:
            raise KeyError(f"no enabled LLM {llm_id!r} in the registry (have: {', '.join(self._slots)})")
        self._selected = llm_id

    @property
    def selected(self) -> str | None:
        return self._selected

    @property
    def primary_id(self) -> str:
        return self._selected or next(iter(self._slots))

    @contextmanager
    def cancel_when(self, event: threading.Event) -> Iterator[None]:
        """While inside: setting `event` cancels the model call in flight, and every later one, with LLMCancelled."""
        previous, self.cancel = self.cancel, event
        try:
            yield
        finally:
            self.cancel = previous

    @contextmanager
    def cancel_here(self, event: threading.Event) -> Iterator[None]:
        """While inside, in this thread only: setting `event` cancels this thread's model call in flight (as the run's
        stop does every thread's); the calls of other threads (a background question to another model) go on."""
        previous = getattr(self._here, "event", None)
        self._here.event = event
        try:
            yield
        finally:
            self._here.event = previous

    def _cancel(self) -> threading.Event:
        """What cancels a call made now, in this thread: the run's stop, and this thread's own event if it has one."""
        here = getattr(self._here, "event", None)
        return self.cancel if here is None else EitherEvent(self.cancel, here)

    def provider(self, llm_id: str) -> Provider:
        slot = self._all[llm_id]
        if slot.provider is None:
            from llm.providers import build_provider

            slot.provider = build_provider(slot.entry)
        return slot.provider

    def primary(self) -> Provider:
        return self.provider(self.primary_id)

    def entry(self, llm_id: str) -> dict[str, Any]:
        return self._all[llm_id].entry

    def validators(self, min_trust: float = 0.0) -> list[dict[str, Any]]:
        """Validator entries whose trust has not drifted below `min_trust`."""
        return [
            s.entry
            for s in self._slots.values()
            if s.entry.get("is_validator") and float(s.entry.get("trust_score", 1.0)) >= min_trust
        ]

    def order(self, prefer: str | None = None) -> list[str]:
        first = prefer or self.primary_id
        return [first] + [i for i in self._slots if i != first]

    def generate(
        self,
        purpose: str,
        *,
        prompt: str | None = None,
        messages: list[dict[str, str]] | None = None,
        sampling: Sampling | None = None,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        prefer: str | None = None,
        only: str | None = None,
        tags: dict[str, Any] | None = None,
    ) -> Generation:
        """Call the preferred model, failing over by priority on any failure; record every attempt."""
        if (prompt is None) == (messages is None):
            raise ValueError("pass exactly one of prompt= or messages=")
        sampling = sampling or Sampling()
        tried: list[str] = []
        errors: list[str] = []
        candidates = [only] if only else self.order(prefer)
        now = self.clock()
        ready = [i for i in candidates if only or self._all[i].down_until <= now]
        if not ready:  # every model is backing off: probe the one due first, so an outage ends by itself
            ready = [min(candidates, key=lambda i: self._all[i].down_until)]
        cancel = self._cancel()
        for llm_id in ready:
            if cancel.is_set():
                raise LLMCancelled(f"{purpose}: the run was stopped before {llm_id} was asked")
            slot = self._all[llm_id]
            tried.append(llm_id)
            started = time.perf_counter()
            with model_call_span(
                purpose, slot.entry, chat=messages is not None, sampling=sampling, messages=messages, prompt=prompt
            ) as span:
                try:
                    provider = self.provider(llm_id)
                    if messages is not None:
                        gen = provider.chat(
                            messages, sampling, stop=stop, json_schema=json_schema, on_token=on_token, cancel=cancel
                        )
                    else:
                        assert prompt is not None  # exactly one of prompt and messages (checked above)
                        gen = provider.complete(
                            prompt, sampling, stop=stop, json_schema=json_schema, on_token=on_token, cancel=cancel
                        )
                except LLMCancelled:
                    failed(span, "cancelled")
                    self._record(
                        purpose,
                        slot.entry,
                        None,
                        tags,
                        error="cancelled: the run was stopped",
                        latency_ms=(time.perf_counter() - started) * 1000,
                    )
                    raise
                except Exception as exc:  # noqa: BLE001 - any provider failure is classified, recorded and failed over
                    failure = exc if isinstance(exc, LLMUnavailable) else self._unexpected(llm_id, exc)
                    failed(span, failure.kind)
                    self._set_aside(slot, failure)
                    errors.append(f"{failure.kind}: {failure}")
                    self._record(
                        purpose,
                        slot.entry,
                        None,
                        tags,
                        error=f"{failure.kind}: {failure}"[:2000],
                        latency_ms=(time.perf_counter() - started) * 1000,
                    )
                    continue
                answered(span, gen)
            slot.failures, slot.down_until = 0, 0.0
            gen.failed_over_from = tried[:-1]
            self._record(purpose, slot.entry, gen, tags)
            return gen
        raise AllLLMsUnavailable("no LLM answered: " + "; ".join(errors))

    @staticmethod
    def _unexpected(llm_id: str, exc: Exception) -> LLMUnavailable:
        log.warning("LLM %s failed unexpectedly", llm_id, exc_info=exc)
        return LLMUnavailable(f"{llm_id}: {type(exc).__name__}: {exc}", kind=ERROR)

    def _set_aside(self, slot: _Slot, failure: LLMUnavailable) -> None:
        """How long the model is skipped (tried last only if every model is set aside) after this failure."""
        if failure.kind in (BAD_REQUEST, ERROR):
            return  # the request or our side failed, not the model: the next request may well succeed
        slot.failures += 1
        if failure.kind in (AUTH, NOT_FOUND):  # a wrong key or model name does not fix itself within seconds
            wait = self.max_backoff_s
        else:
            wait = min(self.max_backoff_s, self.backoff_s * 2 ** (slot.failures - 1))
            if failure.kind == RATE_LIMITED and failure.retry_after is not None:
                wait = min(self.max_backoff_s, max(wait, failure.retry_after))
        slot.down_until = self.clock() + wait

    def _record(
        self,
        purpose: str,
        entry: dict[str, Any],
        gen: Generation | None,
        tags: dict[str, Any] | None,
        error: str | None = None,
        latency_ms: float = 0.0,
    ) -> None:
        if self.recorder is None:
            return
        self.recorder(
            {
                **(tags or {}),
                "purpose": purpose,
                "llm_id": entry["id"],
                "provider": entry.get("provider", ""),
                "model": gen.model if gen else entry.get("model", ""),
                "prompt_tokens": gen.prompt_tokens if gen else 0,
                "completion_tokens": gen.completion_tokens if gen else 0,
                "cached_tokens": gen.cached_tokens if gen else 0,
                "latency_ms": gen.latency_ms if gen else latency_ms,
                "ok": gen is not None,
                "error": error,
            }
        )
