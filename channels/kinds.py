"""The channel kinds, by name → the class that implements each (imported only when a configured channel needs it:
a kind's client library loads only where it runs). A kind's class has `from_entry(entry, secrets)`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from channels.base import Channel
    from persona.settings import ChannelEntry

CHANNEL_KINDS: dict[str, str] = {
    "matrix": "channels.matrix:MatrixChannel",
    "email": "channels.email:EmailChannel",
    "telegram": "channels.telegram:TelegramChannel",
}


class UnknownChannelKind(ValueError):
    pass


def build_channel(entry: ChannelEntry) -> Channel:
    """The configured channel, its secrets read now (environment, secrets file); no network until `open()`."""
    target = CHANNEL_KINDS.get(entry.kind)
    if target is None:
        raise UnknownChannelKind(
            f"channel {entry.name}: unknown kind {entry.kind!r} (one of {', '.join(sorted(CHANNEL_KINDS))})"
        )
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise UnknownChannelKind(f"channel {entry.name}: kind {entry.kind!r} is not available here: {exc}") from exc
    channel: Channel = cls.from_entry(entry, entry.secrets())
    return channel
