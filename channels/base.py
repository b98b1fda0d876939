"""The contract every channel keeps (see the package's docstring for what a channel is not).

Exactly once, both ways:
- in: `fetch(cursor)` may return a message again (after a crash before the cursor was stored); the manager keeps
  one note per `(channel, platform_id)`, so a repeat is dropped;
- out: the outbox gives every message an `idempotency_key` before it is sent; `send` uses it where the platform
  deduplicates (Matrix's transaction id, the e-mail's Message-ID), returns as soon as the platform accepted, and the
  runner records that before anything else (`settle` comes after); `already_sent` asks the platform where it can.
  What each channel guarantees across a kill -9 is in docs/channels.md ("Sent once?").
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Literal

AttachmentKind = Literal["text", "audio", "image", "file"]


@dataclass(frozen=True)
class Attachment:
    kind: AttachmentKind
    name: str
    mime: str
    size: int
    ref: str  # the platform's reference (an mxc:// URI, a Telegram file_id, a MIME part's index)
    data: bytes | None = None  # the content when it was fetched within the channel's size cap


@dataclass(frozen=True)
class Incoming:
    channel: str  # the channel's name in config.yaml ("matrix", "telegram", "email", …)
    platform_id: str  # the platform's message id: the deduplication key
    sender: str  # the sender's identity on this channel ("@ann:example.org", a Telegram user id, an address)
    sender_name: str
    conversation: str  # where to answer: a room id, a chat id, an e-mail thread's root Message-ID
    text: str
    sent_at: datetime
    reply_to: str | None = None  # the platform id this message answers (In-Reply-To, a Matrix reply)
    attachments: tuple[Attachment, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)  # e.g. an e-mail's subject and References
    # why the channel cannot vouch that `sender` sent it ("" = it can: the platform authenticated them); an e-mail
    # whose From failed authentication (channels/email_auth.py) is handled as from an unverified stranger
    unverified: str = ""
    # why the channel could not read it (""= it could): set aside — recorded for the owner to see, nothing of it kept,
    # no one's — so the cursor moves past it
    quarantined: str = ""
    # only the sender and the persona read `conversation` (a direct room, a private chat, a mail to the persona):
    # a message to the sender may go there; one written in a shared room goes to a direct conversation instead
    private: bool = False


@dataclass(frozen=True)
class Outgoing:
    idempotency_key: str  # given by the outbox before the first attempt; the same on every retry
    recipient: str  # the person's identity on this channel
    text: str
    conversation: str | None = None  # None: the channel's direct conversation with the recipient
    reply_to: str | None = None
    audio: bytes | None = None  # a spoken answer (OGG/Opus or WAV), sent beside the text where the platform can
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Batch:
    messages: tuple[Incoming, ...]
    cursor: str | None  # stored after the messages are recorded; the next fetch starts from it


class ChannelDown(Exception):
    """The platform cannot be reached now (network, 5xx, rate limit): the runner backs off and keeps the outbox."""

    def __init__(self, message: str, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ChannelRefused(Exception):
    """The platform refused this message for good (unknown recipient, too large): the outbox marks it failed."""


class Channel(abc.ABC):
    """One configured channel. Secrets reach it from the environment or a secrets file, never from the database."""

    kind: ClassVar[str]  # "matrix", "telegram", "email"

    def __init__(self, name: str):
        self.name = name

    @abc.abstractmethod
    async def open(self) -> None:
        """Log in / connect; raise ChannelDown when the platform cannot be reached."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def fetch(self, cursor: str | None, *, wait_s: float) -> Batch:
        """What arrived after `cursor`, waiting up to `wait_s` for something (long polling, IMAP IDLE, /sync)."""

    @abc.abstractmethod
    async def send(self, message: Outgoing) -> str:
        """Deliver and return the platform's id of the sent message."""

    # whether `already_sent` can tell (False: a resend after a cut-off attempt may arrive twice, and the outbox
    # row says so)
    can_tell_sent: bool = True

    async def already_sent(self, message: Outgoing) -> str | None:
        """The platform id of a message sent earlier with this idempotency key, where the platform can tell."""
        return None

    async def settle(self, message: Outgoing, platform_id: str) -> None:  # noqa: B027 - a hook that does nothing unless a channel needs it
        """What follows a send once the outbox has recorded it (the e-mail's copy in Sent): a kill before it loses
        only this, never the record that the message went out."""

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """An attachment's content, refused (ChannelRefused) beyond `max_bytes`."""
        if attachment.data is not None and len(attachment.data) <= max_bytes:
            return attachment.data
        raise ChannelRefused(f"{attachment.name}: not available within {max_bytes} bytes")
