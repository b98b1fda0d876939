"""The LLM registry (which models there are, their trust) and the accounting of every call made to them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Select, bindparam, case, func, insert, select, update

from memory.models import LLMCall, LLMRegistryEntry
from memory.repositories.base import Repo, insert_values, prepared, table_of


@prepared
def _totals(thread: bool, tick: bool) -> Select[int, int, int, float]:
    """Core (the table's columns): plain numbers back."""
    c = table_of(LLMCall).c
    q = select(
        func.count(c.id),
        func.coalesce(func.sum(c.prompt_tokens), 0),
        func.coalesce(func.sum(c.completion_tokens), 0),
        func.coalesce(func.sum(c.latency_ms), 0.0),
    )
    if thread:
        q = q.where(c.thread_id == bindparam("thread_id"))
    if tick:
        q = q.where(c.tick == bindparam("tick"))
    return q


@prepared
def _insert_call() -> Insert:
    return insert(table_of(LLMCall))


class LLMRegistryRepo(Repo):
    def upsert(self, entry_id: str, **fields: Any) -> LLMRegistryEntry:
        return self._upsert(self.session.get(LLMRegistryEntry, entry_id), LLMRegistryEntry, {"id": entry_id, **fields})

    def enabled(self) -> list[LLMRegistryEntry]:
        return list(
            self.session.scalars(
                select(LLMRegistryEntry)
                .where(LLMRegistryEntry.enabled.is_(True))
                .order_by(LLMRegistryEntry.priority.desc(), LLMRegistryEntry.id)
            ).all()
        )

    def all(self) -> list[LLMRegistryEntry]:
        return list(self.session.scalars(select(LLMRegistryEntry).order_by(LLMRegistryEntry.priority.desc())).all())

    def remove(self, entry_id: str) -> bool:
        """Forget a model (one added at run time and removed again); its recorded calls stay. False: none."""
        row = self.session.get(LLMRegistryEntry, entry_id)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def disable_missing(self, keep_ids: Iterable[str]) -> None:
        keep = list(keep_ids)
        self.session.execute(update(LLMRegistryEntry).where(LLMRegistryEntry.id.notin_(keep)).values(enabled=False))


class LLMCallRepo(Repo):
    def add(self, **fields: Any) -> LLMCall:
        row = LLMCall(**fields)
        self.session.add(row)
        self.session.flush()
        return row

    def record(self, **fields: Any) -> None:
        """One call's accounting, as `add` stores it, in one Core INSERT (a tick records every call it makes)."""
        self.core(_insert_call(), insert_values(LLMCall, fields))

    def totals(self, thread_id: str | None = None, tick: int | None = None) -> dict[str, float]:
        calls, prompt, completion, ms = self.core(
            _totals(thread_id is not None, tick is not None), {"thread_id": thread_id, "tick": tick}
        ).one()
        return {
            "calls": int(calls),
            "prompt_tokens": int(prompt),
            "completion_tokens": int(completion),
            "latency_ms": float(ms),
        }

    def by_model(self) -> list[dict[str, Any]]:
        rows = self.session.execute(
            select(
                LLMCall.llm_id,
                LLMCall.provider,
                LLMCall.model,
                LLMCall.purpose,
                func.count(LLMCall.id),
                func.sum(LLMCall.prompt_tokens),
                func.sum(LLMCall.completion_tokens),
                func.sum(LLMCall.latency_ms),
                func.sum(case((LLMCall.ok.is_(False), 1), else_=0)),
            ).group_by(LLMCall.llm_id, LLMCall.provider, LLMCall.model, LLMCall.purpose)
        ).all()
        return [
            {
                "llm_id": r[0],
                "provider": r[1],
                "model": r[2],
                "purpose": r[3],
                "calls": int(r[4]),
                "prompt_tokens": int(r[5] or 0),
                "completion_tokens": int(r[6] or 0),
                "latency_ms": round(float(r[7] or 0), 1),
                "failed": int(r[8] or 0),
            }
            for r in rows
        ]

    def spend_since(self, since: datetime) -> list[dict[str, Any]]:
        """What the calls made at `since` or later spent, per model: calls, prompt tokens (and of them cached),
        completion tokens."""
        rows = self.session.execute(
            select(
                LLMCall.llm_id,
                LLMCall.model,
                func.count(LLMCall.id),
                func.coalesce(func.sum(LLMCall.prompt_tokens), 0),
                func.coalesce(func.sum(LLMCall.cached_tokens), 0),
                func.coalesce(func.sum(LLMCall.completion_tokens), 0),
            )
            .where(LLMCall.created_at >= since)
            .group_by(LLMCall.llm_id, LLMCall.model)
            .order_by(LLMCall.llm_id)
        ).all()
        return [
            {
                "llm_id": r[0],
                "model": r[1],
                "calls": int(r[2]),
                "prompt_tokens": int(r[3]),
                "cached_tokens": int(r[4]),
                "completion_tokens": int(r[5]),
            }
            for r in rows
        ]

    def metrics(self, buckets_s: Iterable[float]) -> dict[str, list[dict[str, Any]]]:
        """Every call's accounting summed for a metrics scrape: by model and purpose (ok, failed) and by model (tokens,
        cached, the calls at or under each latency bound in seconds, the latency's sum in seconds)."""
        bounds = list(buckets_s)
        by_purpose = self.session.execute(
            select(
                LLMCall.model,
                LLMCall.purpose,
                func.sum(case((LLMCall.ok.is_(True), 1), else_=0)),
                func.sum(case((LLMCall.ok.is_(False), 1), else_=0)),
            ).group_by(LLMCall.model, LLMCall.purpose)
        ).all()
        by_model = self.session.execute(
            select(
                LLMCall.model,
                func.count(LLMCall.id),
                func.coalesce(func.sum(LLMCall.prompt_tokens), 0),
                func.coalesce(func.sum(LLMCall.cached_tokens), 0),
                func.coalesce(func.sum(LLMCall.completion_tokens), 0),
                func.coalesce(func.sum(LLMCall.latency_ms), 0.0),
                *(func.sum(case((LLMCall.latency_ms <= bound * 1000, 1), else_=0)) for bound in bounds),
            ).group_by(LLMCall.model)
        ).all()
        return {
            "by_purpose": [
                {"model": r[0], "purpose": r[1], "ok": int(r[2] or 0), "failed": int(r[3] or 0)} for r in by_purpose
            ],
            "by_model": [
                {
                    "model": r[0],
                    "calls": int(r[1]),
                    "prompt_tokens": int(r[2]),
                    "cached_tokens": int(r[3]),
                    "completion_tokens": int(r[4]),
                    "latency_s": float(r[5]) / 1000,
                    "buckets": [int(n or 0) for n in r[6:]],
                }
                for r in by_model
            ],
        }

    def at_ticks(self, thread_id: str, ticks: Iterable[int]) -> list[LLMCall]:
        """The calls made in these ticks of a thread (failed attempts included), oldest first."""
        return list(
            self.session.scalars(
                select(LLMCall)
                .where(LLMCall.thread_id == thread_id, LLMCall.tick.in_(list(ticks)))
                .order_by(LLMCall.id)
            ).all()
        )

    def recent(self, limit: int = 20) -> list[LLMCall]:
        return list(reversed(self.session.scalars(select(LLMCall).order_by(LLMCall.id.desc()).limit(limit)).all()))
