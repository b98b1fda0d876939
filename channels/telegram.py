"""Telegram as a channel: a bot over the Bot API with python-telegram-bot's `Bot` (no Application: the runner owns
the loop), long polling with getUpdates.

- cursor: the next update offset (the last update_id + 1). The Bot API forgets updates only when a higher offset
  is asked for, and the runner stores the cursor after recording: after a crash the old offset gets the same
  updates again, with the same ids.
- in: `platform_id` is `<chat id>:<message id>` (message ids count per chat), `sender` the user id, `conversation`
  the chat id; text or a caption; a document is "text" (text/*, PDF) or "file", a voice note or audio file "audio",
  a photo "image" — by reference (the file_id), fetched by `download` (getFile) within the size cap.
- out: sendMessage (cut into 4096-character pieces; the first piece's id is the message's), a reply when `reply_to`
  names a message of that chat; `Outgoing.audio` goes after the text as a voice note (sendVoice) when it is OGG/Opus,
  else as a file (sendDocument).
- already_sent: the Bot API cannot tell (no idempotency key, no history): None, so a crash between sending and
  recording may send a message twice — the outbox's row then says `possible duplicate` (`can_tell_sent` False).

Options (`options:` of a `kind: telegram` entry) — see `TelegramOptions`; the secret `token` comes from the entry's
secrets (environment or secrets file). `api_url` points the bot at another Bot API server (a local
telegram-bot-api, or the tests' stand-in).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from channels.base import Attachment, AttachmentKind, Batch, Channel, ChannelDown, ChannelRefused, Incoming, Outgoing
from channels.options import ChannelEntryLike
from channels.options import parse_options as parse_entry_options

if TYPE_CHECKING:
    from telegram import Bot, Message

MAX_TEXT = 4096
BOT_PATH = re.compile(r"/(file/)?bot[^/\s\"']+")
# python-telegram-bot and httpx log Bot API URLs, which carry the token: these loggers get the redactor
URL_LOGGERS = ("httpx", "telegram", "telegram.Bot", "telegram.BaseRequest", "telegram.HTTPXRequest")


class RedactBotToken(logging.Filter):
    """`/bot<token>` → `/bot***` in a log record's message and arguments (a secret is never logged)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "/bot" in record.msg:
            record.msg = BOT_PATH.sub(r"/\1bot***", record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(BOT_PATH.sub(r"/\1bot***", str(a)) if "/bot" in str(a) else a for a in record.args)
        return True


def redact_tokens_in_logs() -> None:
    for name in URL_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, RedactBotToken) for f in target.filters):
            target.addFilter(RedactBotToken())


class TelegramOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    api_url: str = Field("https://api.telegram.org", description="the Bot API server (…/bot<token>/<method>)")
    timeout_s: float = Field(30.0, gt=0, le=600, description="connect/read timeout of a call (long polls add wait)")
    batch: int = Field(100, ge=1, le=100, description="updates per fetch at most")

    @field_validator("api_url")
    @classmethod
    def _http(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL")
        if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the token travels in the URL: http only on loopback, https elsewhere")
        return value.rstrip("/")


def parse_options(name: str, options: Mapping[str, str]) -> TelegramOptions:
    return parse_entry_options(TelegramOptions, name, options)


def utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def document_kind(mime: str) -> AttachmentKind:
    if mime.startswith("text/") or mime == "application/pdf":
        return "text"
    if mime.startswith("audio/"):
        return "audio"
    if mime.startswith("image/"):
        return "image"
    return "file"


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.voice is not None:
        v = message.voice
        found.append(
            Attachment(
                kind="audio",
                name=f"voice-{message.message_id}.ogg",
                mime=v.mime_type or "audio/ogg",
                size=v.file_size or 0,
                ref=v.file_id,
            )
        )
    if message.audio is not None:
        a = message.audio
        found.append(
            Attachment(
                kind="audio",
                name=a.file_name or f"audio-{message.message_id}",
                mime=a.mime_type or "audio/mpeg",
                size=a.file_size or 0,
                ref=a.file_id,
            )
        )
    if message.document is not None:
        d = message.document
        mime = d.mime_type or "application/octet-stream"
        found.append(
            Attachment(
                kind=document_kind(mime),
                name=d.file_name or f"document-{message.message_id}",
                mime=mime,
                size=d.file_size or 0,
                ref=d.file_id,
            )
        )
    if message.photo:
        p = max(message.photo, key=lambda size: size.width * size.height)
        found.append(
            Attachment(
                kind="image",
                name=f"photo-{message.message_id}.jpg",
                mime="image/jpeg",
                size=p.file_size or 0,
                ref=p.file_id,
            )
        )
    return tuple(found)


def incoming_of(channel: str, message: Message) -> Incoming | None:
    """A message from a person (not a bot, not a channel post without a sender) as an Incoming."""
    user = message.from_user
    if user is None or user.is_bot:
        return None
    chat_id = message.chat.id
    reply = message.reply_to_message
    extra = {"chat_type": str(message.chat.type)}
    if user.username:
        extra["username"] = user.username
    sent_at = utc(message.date)
    return Incoming(
        channel=channel,
        platform_id=f"{chat_id}:{message.message_id}",
        sender=str(user.id),
        sender_name=user.full_name or user.username or str(user.id),
        conversation=str(chat_id),
        text=message.text or message.caption or "",
        sent_at=sent_at,
        reply_to=f"{chat_id}:{reply.message_id}" if reply is not None else None,
        attachments=attachments_of(message),
        extra=extra,
        private=str(message.chat.type) in ("private", "ChatType.PRIVATE"),
    )  # a chat with them alone


def split_text(text: str, limit: int = MAX_TEXT) -> list[str]:
    """Pieces of at most `limit` characters, cut at a line or a space where one is near."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = max(text.rfind("\n", 0, limit), text.rfind(" ", 0, limit))
        cut = cut if cut > limit // 2 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n ")
    return pieces + [text] if text or not pieces else pieces


class TelegramChannel(Channel):
    kind: ClassVar[str] = "telegram"
    can_tell_sent = False  # the Bot API keeps no key and shows a bot no history of its own messages

    def __init__(
        self, name: str, options: TelegramOptions, token: Callable[[], str], *, max_attachment_bytes: int = 20_000_000
    ):
        super().__init__(name)
        self.options = options
        self._token = token  # resolved when the bot is made; never logged (PTB keeps it inside its URLs)
        self.max_attachment_bytes = max_attachment_bytes
        self._bot: Bot | None = None
        self.username: str | None = None

    @classmethod
    def from_entry(cls, entry: ChannelEntryLike, secrets: Mapping[str, str]) -> TelegramChannel:
        options = parse_options(entry.name, entry.options)
        if not secrets.get("token"):
            raise ValueError(f"{entry.name}: the secret `token` is missing (secret_env or secrets_file)")
        token = secrets["token"]
        return cls(entry.name, options, lambda: token, max_attachment_bytes=entry.max_attachment_bytes)

    def _make_bot(self) -> Bot:
        from telegram import Bot
        from telegram.request import HTTPXRequest

        redact_tokens_in_logs()
        t = self.options.timeout_s
        api = self.options.api_url
        return Bot(
            self._token(),
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connect_timeout=t, read_timeout=t, write_timeout=t, media_write_timeout=t),
            get_updates_request=HTTPXRequest(connect_timeout=t, read_timeout=t, connection_pool_size=1),
        )

    async def open(self) -> None:
        bot = self._make_bot()
        me = await self._call(bot.get_me())
        self._bot, self.username = bot, me.username

    async def close(self) -> None:
        bot, self._bot = self._bot, None
        if bot is not None:
            try:
                await bot.shutdown()
            except Exception:  # noqa: BLE001 - closing a client whose server may be gone
                pass

    def _ready(self) -> Bot:
        if self._bot is None:
            raise ChannelDown(f"{self.name}: not open")
        return self._bot

    async def _call(self, call: Any) -> Any:
        """A Bot API call with its failures as the channel's: retry later (network, flood control, 5xx) or never
        (forbidden, bad request, chat not found)."""
        from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError

        try:
            return await call
        except RetryAfter as exc:
            wait = exc.retry_after
            seconds = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
            raise ChannelDown(f"{self.name}: flood control", retry_after_s=seconds) from exc
        except (Forbidden, BadRequest) as exc:
            raise ChannelRefused(f"{self.name}: {exc.message}") from exc
        except (InvalidToken, NetworkError, TelegramError) as exc:  # NetworkError covers TimedOut and 5xx
            raise ChannelDown(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def fetch(self, cursor: str | None, *, wait_s: float) -> Batch:
        bot = self._ready()
        offset = int(cursor) if cursor and cursor.lstrip("-").isdigit() else None
        updates = await self._call(
            bot.get_updates(
                offset=offset, timeout=int(max(0.0, wait_s)), limit=self.options.batch, allowed_updates=["message"]
            )
        )
        if not updates:
            return Batch(messages=(), cursor=cursor)
        messages = [m for u in updates if u.message is not None and (m := incoming_of(self.name, u.message))]
        return Batch(messages=tuple(messages), cursor=str(max(u.update_id for u in updates) + 1))

    async def send(self, message: Outgoing) -> str:
        from telegram import ReplyParameters

        bot = self._ready()
        chat = message.conversation or message.recipient
        try:
            chat_id = int(chat)
        except ValueError as exc:
            raise ChannelRefused(f"{self.name}: {chat!r} is not a Telegram chat id") from exc
        reply = None
        if message.reply_to and message.reply_to.startswith(f"{chat_id}:"):
            reply = ReplyParameters(
                message_id=int(message.reply_to.rpartition(":")[2]), allow_sending_without_reply=True
            )
        first: str | None = None
        if message.text.strip() or not message.audio:
            for piece in split_text(message.text):
                sent = await self._call(bot.send_message(chat_id, piece, reply_parameters=reply))
                first = first or f"{chat_id}:{sent.message_id}"
                reply = None
        if message.audio:
            if message.audio[:4] == b"OggS":  # a voice note must be OGG/Opus; anything else goes as a file
                spoken = await self._call(bot.send_voice(chat_id, message.audio, reply_parameters=reply))
            else:
                name = "answer.wav" if message.audio[:4] == b"RIFF" else "answer.bin"
                spoken = await self._call(
                    bot.send_document(chat_id, message.audio, filename=name, reply_parameters=reply)
                )
            first = first or f"{chat_id}:{spoken.message_id}"
        assert first is not None
        return first

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        if attachment.size > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {attachment.size} bytes, more than {max_bytes}")
        if attachment.data is not None:
            return attachment.data
        bot = self._ready()
        file = await self._call(bot.get_file(attachment.ref))
        if file.file_size is not None and file.file_size > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {file.file_size} bytes, more than {max_bytes}")
        data = bytes(await self._call(file.download_as_bytearray()))
        if len(data) > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {len(data)} bytes, more than {max_bytes}")
        return data
