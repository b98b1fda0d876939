"""What the persona spends on its models, and what its budget still allows (`budget.*` settings).

The spend is read from the accounting of every model call (`llm_calls`): today (the persona's time zone) and the
last hour, per model, with the prompt tokens a server served from its cache apart from the new ones, and as money
when the model has a price. A budget counts every token (prompt, cached included, and completion). Its state:
`ok`; `low` (less than `budget.low_share` of a budget left: the persona thinks only when someone wrote — no free
thought, no dream, no task sub-cycle); `spent` (it only answers its humans). The loop driver asks `state` before a
tick (managers/thinking.py), the Controls page and `run.py inspect` show `spend`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

BudgetState = Literal["ok", "low", "spent"]


def _priced(row: dict[str, Any], settings: Settings) -> float | None:
    price = settings.budget.prices.get(row["llm_id"]) or settings.budget.prices.get(row["model"])
    if price is None:
        return None
    new = int(row["prompt_tokens"]) - int(row["cached_tokens"])
    cost = (
        new * price.prompt + int(row["cached_tokens"]) * price.cached + int(row["completion_tokens"]) * price.completion
    )
    return float(cost) / 1e6


def _summed(rows: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    total: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0}
    money: float | None = None
    for row in rows:
        for key in total:
            total[key] += row[key]
        cost = _priced(row, settings)
        if cost is not None:
            money = (money or 0.0) + cost
    total["new_prompt_tokens"] = total["prompt_tokens"] - total["cached_tokens"]
    total["tokens"] = total["prompt_tokens"] + total["completion_tokens"]
    total["cost"] = round(money, 6) if money is not None else None
    return total


class BudgetManager:
    """The spend and the budget's state, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def _settings(self) -> Settings:
        settings = self.house.deps.settings
        if settings is None:
            raise ValueError("BudgetManager needs the settings (ManagerDeps.settings)")
        return settings

    def spend(self, now: datetime) -> dict[str, Any]:
        """{"today", "hour": totals; "by_model": today's per model; "budget": the limits, what is left, the state}."""
        settings = self._settings()
        local = now.astimezone(settings.zone())
        midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
        today_rows = self.repos.llm_calls.spend_since(midnight)
        hour_rows = self.repos.llm_calls.spend_since(now - timedelta(hours=1))
        today, hour = _summed(today_rows, settings), _summed(hour_rows, settings)
        by_model = [
            {
                **row,
                "new_prompt_tokens": row["prompt_tokens"] - row["cached_tokens"],
                "cost": (round(c, 6) if (c := _priced(row, settings)) is not None else None),
            }
            for row in today_rows
        ]
        return {
            "today": today,
            "hour": hour,
            "by_model": by_model,
            "currency": settings.budget.currency,
            "budget": self._limits(today["tokens"], hour["tokens"]),
        }

    def _limits(self, today: int, hour: int) -> dict[str, Any]:
        budget = self._settings().budget
        state: BudgetState = "ok"
        left: dict[str, int | None] = {"day": None, "hour": None}
        for name, limit, used in (("day", budget.tokens_per_day, today), ("hour", budget.tokens_per_hour, hour)):
            if limit is None:
                continue
            left[name] = max(0, limit - used)
            if used >= limit:
                state = "spent"
            elif state == "ok" and limit - used < budget.low_share * limit:
                state = "low"
        return {
            "tokens_per_day": budget.tokens_per_day,
            "tokens_per_hour": budget.tokens_per_hour,
            "left": left,
            "state": state,
        }

    def metrics(self, latency_buckets_s: Sequence[float]) -> dict[str, Any]:
        """What a metrics scrape reads (graph/telemetry.py): every call's accounting summed (by model and purpose;
        by model with its latency buckets), ticks by status, the quiet ticks, the seconds each answered human waited."""
        repos = self.repos
        return {
            "calls": repos.llm_calls.metrics(latency_buckets_s),
            "ticks": repos.ticks.count_by_status(),
            "quiet": repos.processes.count_named("cycle.quiet"),
            "waits": repos.notes.answer_waits(),
        }

    def state(self, now: datetime) -> BudgetState:
        """ok, low or spent (no budget set: ok, without a query)."""
        budget = self._settings().budget
        if budget.tokens_per_day is None and budget.tokens_per_hour is None:
            return "ok"
        state: BudgetState = self.spend(now)["budget"]["state"]
        return state
