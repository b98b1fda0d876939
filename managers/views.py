"""What a manager hands a door: a frozen view of a row, never the live row. A view is a frozen dataclass whose field
names are the row's column names (so a door reads it as it read the row); `frozen` copies those columns out of the
row — its JSON values too, so nothing a door holds is tied to the session or changes the database when touched.
A view names only the columns a door shows: a column the row loads later (deferred) costs a query if named."""

from __future__ import annotations

import copy
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

V = TypeVar("V")


def frozen(view: type[V], row: Any) -> V:
    """The view `view` of `row` (an ORM row or a plain core row with the same names)."""
    assert is_dataclass(view), f"{view.__name__} is no dataclass"
    values: dict[str, Any] = {}
    for field in fields(view):
        value = getattr(row, field.name)
        values[field.name] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
    return view(**values)


def frozen_all(view: type[V], rows: Any) -> list[V]:
    return [frozen(view, row) for row in rows]


__all__ = ["frozen", "frozen_all"]
