"""The `config` table's values as typed records. The table stores JSON by key (memory/repositories/config.py); the
manager that owns a key reads it through one accessor that gives a record (a frozen pydantic model) and writes it
back through the same model, so what is stored is always what the record allows.

A stored value the record cannot take — hand-edited, written by an older version, cut short — never stops a tick:
`read` keeps the fields that are good, gives the defaults for the rest (all of them when the value is no JSON object)
and logs which key was bad and why."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

log = logging.getLogger(__name__)

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """A config value's shape: frozen; keys it does not know (a newer version's) are passed over."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def stored(self) -> dict[str, Any]:
        """What goes into the table: JSON, of the fields that were read or set (a default is not written out)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def changed(self, **changes: Any) -> Self:
        """This record with `changes` over it, checked as a whole (pydantic's ValidationError when it cannot take
        them)."""
        return self.model_validate({**self.stored(), **changes})


def read(record: type[R], value: Any, key: str) -> R:
    """The record `value` (a stored JSON value, None when the key is absent) holds; the defaults where it is bad."""
    if value is None:
        return record()
    if not isinstance(value, Mapping):
        log.warning("config %s: not a JSON object (%s); its defaults hold", key, type(value).__name__)
        return record()
    try:
        return record.model_validate(value)
    except ValidationError as exc:
        bad = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
        why = "; ".join(f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors())
        log.warning("config %s: %s not readable (%s); their defaults hold", key, ", ".join(bad) or "the value", why)
        kept = {name: v for name, v in value.items() if name not in bad}
        try:
            return record.model_validate(kept)
        except ValidationError:
            return record()


def read_list(record: type[R], value: Any, key: str) -> list[R]:
    """The records a stored JSON list holds, in order; an entry the record cannot take is left out (logged), and a
    value that is no list gives none."""
    if value is None:
        return []
    if not isinstance(value, list):
        log.warning("config %s: not a JSON list (%s); read as empty", key, type(value).__name__)
        return []
    found, bad = [], []
    for index, entry in enumerate(value):
        try:
            found.append(record.model_validate(entry))
        except ValidationError:
            bad.append(str(index))
    if bad:
        log.warning("config %s: entries %s not readable; left out", key, ", ".join(bad))
    return found


__all__ = ["Record", "read", "read_list"]
