"""Matrix, over matrix-nio: the persona is a Matrix user; its humans write to it in rooms (it joins the rooms it is
invited to) and it answers in the room they last wrote in, or in a direct room it opens.

Options (config.yaml `channels.entries[].options`): `homeserver` (http(s) URL), `user_id` ("@anima:example.org"),
`device_id` (default ANIMA: one device across restarts, so the server's transaction-id deduplication holds).
Secrets (`secret_env` / `secrets_file`): `password` or `access_token`.

Exactly once out: every message is sent with the outbox's idempotency key as its transaction id (a resend with the
same id on the same device is the same event) and carries it in its content (`org.anima.key`), so `already_sent`
finds it in the room's recent history after a kill between sending and recording. Rooms are not end-to-end
encrypted here (no olm)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from channels.base import Attachment, Batch, Channel, ChannelDown, ChannelRefused, Incoming, Outgoing

if TYPE_CHECKING:
    from nio import AsyncClient

    from persona.settings import ChannelEntry

KEY_FIELD = "org.anima.key"
HISTORY_LOOKUP = 100  # events scanned for an earlier send with the same key
MEDIA = {"m.audio": "audio", "m.image": "image", "m.file": "file", "m.video": "file"}


class MatrixChannel(Channel):
    kind = "matrix"

    def __init__(
        self,
        name: str,
        *,
        homeserver: str,
        user_id: str,
        password: str | None = None,
        access_token: str | None = None,
        device_id: str = "ANIMA",
        max_attachment_bytes: int = 2_000_000,
        request_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(name)
        if not (password or access_token):
            raise ValueError(f"{name}: matrix needs the secret `password` or `access_token`")
        self.homeserver, self.user_id, self.device_id = homeserver.rstrip("/"), user_id, device_id
        self._password, self._access_token = password, access_token
        self.max_attachment_bytes = max_attachment_bytes
        self.request_timeout_s = request_timeout_s
        self._client: AsyncClient | None = None

    @classmethod
    def from_entry(cls, entry: ChannelEntry, secrets: Mapping[str, str]) -> MatrixChannel:
        options = entry.options
        for needed in ("homeserver", "user_id"):
            if not options.get(needed):
                raise ValueError(f"{entry.name}: matrix needs the option {needed}")
        return cls(
            entry.name,
            homeserver=options["homeserver"],
            user_id=options["user_id"],
            password=secrets.get("password"),
            access_token=secrets.get("access_token"),
            device_id=options.get("device_id", "ANIMA"),
            max_attachment_bytes=entry.max_attachment_bytes,
        )

    # -- connection ---------------------------------------------------------------------------------------------

    @property
    def client(self) -> AsyncClient:
        if self._client is None:
            raise ChannelDown(f"{self.name}: not open")
        return self._client

    async def open(self) -> None:
        from nio import AsyncClient, AsyncClientConfig, LoginResponse

        config = AsyncClientConfig(
            store_sync_tokens=False,
            encryption_enabled=False,
            request_timeout=self.request_timeout_s,
            max_timeouts=1,
            max_limit_exceeded=0,
        )
        client = AsyncClient(self.homeserver, self.user_id, device_id=self.device_id, config=config)
        try:
            if self._access_token:
                client.access_token = self._access_token
                client.user_id = self.user_id
            else:
                answer = await client.login(password=self._password, device_name="anima")
                if not isinstance(answer, LoginResponse):
                    await client.close()
                    raise ChannelDown(f"{self.name}: login refused: {getattr(answer, 'message', answer)}")
        except ChannelDown:
            raise
        except Exception as exc:  # noqa: BLE001 - aiohttp and OS errors: the server cannot be reached
            await client.close()
            raise ChannelDown(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        self._client = client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _call(self, what: str, coroutine: Any) -> Any:
        """A nio call: its error answers and the transport's exceptions become ChannelDown/ChannelRefused."""
        from nio import ErrorResponse

        try:
            answer = await asyncio.wait_for(coroutine, self.request_timeout_s + 60)
        except (TimeoutError, OSError) as exc:
            raise ChannelDown(f"{self.name}: {what}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - aiohttp.ClientError and the like
            raise ChannelDown(f"{self.name}: {what}: {type(exc).__name__}: {exc}") from exc
        if isinstance(answer, ErrorResponse):
            code = str(getattr(answer, "status_code", "") or "")
            message = f"{self.name}: {what}: {code} {answer.message}"
            retry = getattr(answer, "retry_after_ms", None)
            if code in ("M_LIMIT_EXCEEDED",) or code.startswith("5") or not code:
                raise ChannelDown(message, retry_after_s=retry / 1000 if retry else None)
            raise ChannelRefused(message)
        return answer

    # -- in -----------------------------------------------------------------------------------------------------

    async def fetch(self, cursor: str | None, *, wait_s: float) -> Batch:
        answer = await self._call(
            "sync", self.client.sync(timeout=int(wait_s * 1000), since=cursor, full_state=cursor is None)
        )
        for room_id in list(answer.rooms.invite):
            await self._call("join", self.client.join(room_id))
        messages: list[Incoming] = []
        for room_id, room in answer.rooms.join.items():
            for event in room.timeline.events:
                incoming = self._incoming(room_id, event)
                if incoming is not None:
                    messages.append(incoming)
        return Batch(tuple(messages), answer.next_batch)

    def _incoming(self, room_id: str, event: Any) -> Incoming | None:
        source = getattr(event, "source", None) or {}
        if source.get("type") != "m.room.message" or getattr(event, "sender", None) == self.user_id:
            return None
        content = source.get("content") or {}
        msgtype = str(content.get("msgtype", ""))
        body = str(content.get("body", ""))
        attachments: tuple[Attachment, ...] = ()
        text = body
        if msgtype in MEDIA:
            info = content.get("info") or {}
            attachments = (
                Attachment(
                    kind=MEDIA[msgtype]
                    if msgtype != "m.file" or not str(info.get("mimetype", "")).startswith("text/")
                    else "text",  # type: ignore[arg-type]
                    name=body or "attachment",
                    mime=str(info.get("mimetype", "")),
                    size=int(info.get("size") or 0),
                    ref=str(content.get("url", "")),
                ),
            )
            text = ""
        elif msgtype not in ("m.text", "m.notice", "m.emote"):
            return None
        relates = (content.get("m.relates_to") or {}).get("m.in_reply_to") or {}
        stamp = int(source.get("origin_server_ts") or 0) / 1000
        room = self.client.rooms.get(room_id)
        name = room.user_name(event.sender) if room is not None else None
        # private: the room's members (joined or invited) are the sender and the persona alone, as the sync knows them
        private = room is not None and set(room.users) | set(room.invited_users) == {self.user_id, str(event.sender)}
        return Incoming(
            channel=self.name,
            platform_id=str(source.get("event_id")),
            sender=str(event.sender),
            sender_name=name or str(event.sender),
            conversation=room_id,
            text=text,
            sent_at=datetime.fromtimestamp(stamp, UTC),
            reply_to=relates.get("event_id"),
            attachments=attachments,
            private=private,
        )

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        if attachment.size and attachment.size > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {attachment.size} bytes, over {max_bytes}")
        answer = await self._call("download", self.client.download(mxc=attachment.ref))
        body = bytes(getattr(answer, "body", b""))
        if len(body) > max_bytes:
            raise ChannelRefused(f"{attachment.name}: over {max_bytes} bytes")
        return body

    # -- out ----------------------------------------------------------------------------------------------------

    async def send(self, message: Outgoing) -> str:
        room_id = (
            message.conversation
            or self._known_direct_room(message.recipient)
            or await self._direct_room(message.recipient)
        )
        content: dict[str, Any] = {"msgtype": "m.text", "body": message.text, KEY_FIELD: message.idempotency_key}
        if message.reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": message.reply_to}}
        answer = await self._call(
            "send", self.client.room_send(room_id, "m.room.message", content, tx_id=message.idempotency_key)
        )
        if message.audio:
            await self._send_audio(room_id, message, message.audio)
        return str(answer.event_id)

    async def _send_audio(self, room_id: str, message: Outgoing, audio: bytes) -> None:
        """The spoken answer beside the text, as an m.audio event (its own transaction id: a retry is one event)."""
        ogg = audio[:4] == b"OggS"
        mime, name = ("audio/ogg", "answer.ogg") if ogg else ("audio/wav", "answer.wav")

        async def upload() -> Any:
            answer, _keys = await self.client.upload(
                lambda *_: io.BytesIO(audio), content_type=mime, filename=name, filesize=len(audio)
            )
            return answer

        uploaded = await self._call("upload audio", upload())
        content = {
            "msgtype": "m.audio",
            "body": name,
            "url": uploaded.content_uri,
            "info": {"mimetype": mime, "size": len(audio)},
            KEY_FIELD: f"{message.idempotency_key}:audio",
        }
        await self._call(
            "send audio",
            self.client.room_send(room_id, "m.room.message", content, tx_id=f"{message.idempotency_key}:audio"),
        )

    async def already_sent(self, message: Outgoing) -> str | None:
        room_id = message.conversation or self._known_direct_room(message.recipient)
        if not room_id:
            return None
        answer = await self._call("history", self.client.room_messages(room_id, start="", limit=HISTORY_LOOKUP))
        for event in answer.chunk:
            source = getattr(event, "source", None) or {}
            if (
                source.get("sender") == self.user_id
                and (source.get("content") or {}).get(KEY_FIELD) == message.idempotency_key
            ):
                return str(source.get("event_id"))
        return None

    def _known_direct_room(self, recipient: str) -> str | None:
        """A room (as the last sync knew it) whose only members are the persona and `recipient`, invited or joined:
        where an earlier try opened the conversation."""
        for room_id, room in self.client.rooms.items():
            if set(room.users) | set(room.invited_users) == {self.user_id, recipient}:
                return str(room_id)
        return None

    async def _direct_room(self, recipient: str) -> str:
        answer = await self._call("create room", self.client.room_create(is_direct=True, invite=[recipient]))
        return str(answer.room_id)
