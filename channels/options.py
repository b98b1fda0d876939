"""What a channel kind reads of its settings entry (persona.settings.ChannelEntry: `name`, `options`,
`max_attachment_bytes`), and its `options` — plain strings in config.yaml — parsed into the kind's typed model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from pydantic import BaseModel, ValidationError

Options = TypeVar("Options", bound=BaseModel)


class ChannelEntryLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def options(self) -> Mapping[str, str]: ...

    @property
    def max_attachment_bytes(self) -> int: ...


def parse_options(model: type[Options], name: str, options: Mapping[str, str]) -> Options:
    """`options` as `model`, or ValueError("<name>: option <key>: <what is wrong>") naming the first bad one."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "options"
        raise ValueError(f"{name}: option {where}: {first['msg']}") from exc
