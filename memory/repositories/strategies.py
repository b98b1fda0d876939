"""Loop-breaking strategies and thinking methods (HMP `stagnation_strategies`, `thinking_methods`): data the
escalation reads and the persona curates. Built-in rows are seeded by `ensure`; archiving turns one off
(restorable); use and success counts let the escalation prefer what worked."""

from __future__ import annotations

import builtins
import random
from collections.abc import Iterable
from typing import Any, Unpack

from sqlalchemy import Row, Select, Update, bindparam, select, update

from memory.models import StagnationStrategy, ThinkingMethod
from memory.repositories.base import NamedRowRepo, prepared, table_of


@prepared
def _strategy_lines() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: every strategy as a plain row, oldest first."""
    table = table_of(StagnationStrategy)
    return select(table).order_by(table.c.id)


@prepared
def _method_lines() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: every thinking method as a plain row."""
    return select(table_of(ThinkingMethod))


@prepared
def _count_strategy_uses() -> Update:
    """Core: the named strategies' uses and helps counted up, in one statement (the escalation counts them every
    tick it adds a mechanism)."""
    c = table_of(StagnationStrategy).c
    return (
        update(table_of(StagnationStrategy))
        .where(c.name.in_(bindparam("names", expanding=True)))
        .values(uses=c.uses + bindparam("used"), helped=c.helped + bindparam("helped"))
    )


@prepared
def _count_use() -> Update:
    table = table_of(ThinkingMethod)
    return update(table).where(table.c.id == bindparam("method_id")).values(uses=bindparam("new_uses"))


class StrategyRepo(NamedRowRepo):
    model, what = StagnationStrategy, "stagnation strategy"

    def ensure(self, builtins: dict[str, tuple[str, int]]) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """The built-in mechanisms as rows (name -> (class, cost)); existing rows are left as they are. Returns the
        active rows, as `active` would (read in the same query), as plain rows (by the same names: read only — the
        escalation reads them every tick; `record` counts their uses)."""
        rows = self.core(_strategy_lines()).all()
        have = {row.name for row in rows}
        added = [
            StagnationStrategy(name=name, mechanism_class=klass, cost=cost, builtin=True, status="active")
            for name, (klass, cost) in builtins.items()
            if name not in have
        ]
        if added:  # the first time only: the new rows are read back with the others
            self.session.add_all(added)
            self.session.flush()
            rows = self.core(_strategy_lines()).all()
        return [row for row in rows if row.status == "active"]

    def active(self) -> list[StagnationStrategy]:
        return list(
            self.session.scalars(
                select(StagnationStrategy).where(StagnationStrategy.status == "active").order_by(StagnationStrategy.id)
            ).all()
        )

    def list(self, include_archived: bool = False) -> list[StagnationStrategy]:
        q = select(StagnationStrategy)
        if not include_archived:
            q = q.where(StagnationStrategy.status == "active")
        return list(
            self.session.scalars(
                q.order_by(StagnationStrategy.mechanism_class, StagnationStrategy.cost, StagnationStrategy.name)
            ).all()
        )

    def add(self, name: str, mechanism_class: str, cost: int, instruction: str) -> StagnationStrategy:
        if self.session.scalars(select(StagnationStrategy.id).where(StagnationStrategy.name == name)).first():
            raise ValueError(f"a strategy named {name!r} exists already")
        row = StagnationStrategy(name=name, mechanism_class=mechanism_class, cost=cost, instruction=instruction)
        self.session.add(row)
        self.session.flush()
        return row

    def record(self, names: Iterable[str], *, used: bool = False, helped: bool = False) -> None:
        names = list(names)
        if not names:
            return
        self.core(_count_strategy_uses(), {"names": names, "used": int(used), "helped": int(helped)})


class ThinkingMethodRepo(NamedRowRepo):
    model, what = ThinkingMethod, "thinking method"

    def ensure(self, defaults: dict[str, str]) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """The built-in methods as rows; existing rows are left as they are. Returns the active rows, as `list`
        would (read in the same query), as plain rows (by the same names; `draw` counts a use of one)."""
        rows = self.core(_method_lines()).all()
        have = {row.name for row in rows}
        added = [
            ThinkingMethod(name=name, instruction=instruction, builtin=True, status="active")
            for name, instruction in defaults.items()
            if name not in have
        ]
        if added:  # the first time only: the new rows are read back with the others
            self.session.add_all(added)
            self.session.flush()
            rows = self.core(_method_lines()).all()
        return sorted((row for row in rows if row.status == "active"), key=lambda row: row.name)

    def list(self, include_archived: bool = False) -> list[ThinkingMethod]:
        q = select(ThinkingMethod)
        if not include_archived:
            q = q.where(ThinkingMethod.status == "active")
        return list(self.session.scalars(q.order_by(ThinkingMethod.name)).all())

    def add(self, name: str, instruction: str) -> ThinkingMethod:
        if self.session.scalars(select(ThinkingMethod.id).where(ThinkingMethod.name == name)).first():
            raise ValueError(f"a thinking method named {name!r} exists already")
        row = ThinkingMethod(name=name, instruction=instruction)
        self.session.add(row)
        self.session.flush()
        return row

    def draw(self, rng: random.Random, rows: builtins.list[Any] | None = None) -> Any | None:
        """A random active method (the least used more likely), counted as used. `rows`: the active methods, when the
        caller has just read them."""
        rows = self.list() if rows is None else rows
        if not rows:
            return None
        row = rng.choices(rows, weights=[1.0 / (1 + r.uses) for r in rows])[0]
        if isinstance(row, ThinkingMethod):
            row.uses += 1
            self.session.flush()
        else:  # a plain row (`ensure`'s): the use counted in one Core UPDATE
            self.core(_count_use(), {"method_id": row.id, "new_uses": row.uses + 1})
        return row
