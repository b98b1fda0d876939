"""A human on the Matrix server, for the tests and the bench: matrix-nio as an ordinary client (log in, open a room
with the persona, write, read what arrived)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from nio import (
    AsyncClient,
    AsyncClientConfig,
    JoinedMembersResponse,
    LoginResponse,
    RoomCreateResponse,
    RoomMessagesResponse,
    RoomSendResponse,
)


class MatrixHuman:
    def __init__(self, homeserver: str, user_id: str, password: str) -> None:
        self.homeserver, self.user_id, self.password = homeserver, user_id, password
        self.client: AsyncClient | None = None

    async def __aenter__(self) -> MatrixHuman:
        self.client = AsyncClient(
            self.homeserver, self.user_id, config=AsyncClientConfig(store_sync_tokens=False, encryption_enabled=False)
        )
        answer = await self.client.login(self.password)
        assert isinstance(answer, LoginResponse), answer
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.client is not None
        await self.client.close()

    async def room_with(self, *invite: str) -> str:
        assert self.client is not None
        answer = await self.client.room_create(invite=list(invite))
        assert isinstance(answer, RoomCreateResponse), answer
        return answer.room_id

    async def invite(self, room_id: str, user_id: str) -> None:
        assert self.client is not None
        await self.client.room_invite(room_id, user_id)

    async def join(self, room_id: str) -> None:
        assert self.client is not None
        await self.client.join(room_id)

    async def wait_member(self, room_id: str, user_id: str, timeout_s: float = 30) -> None:
        assert self.client is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = await self.client.joined_members(room_id)
            if isinstance(answer, JoinedMembersResponse) and user_id in {m.user_id for m in answer.members}:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"{user_id} did not join {room_id} within {timeout_s}s")

    async def say(self, room_id: str, text: str) -> str:
        assert self.client is not None
        answer = await self.client.room_send(room_id, "m.room.message", {"msgtype": "m.text", "body": text})
        assert isinstance(answer, RoomSendResponse), answer
        return answer.event_id

    async def messages_from(self, room_id: str, sender: str, limit: int = 100) -> list[dict[str, Any]]:
        """The room's recent text messages from `sender`, oldest first (their event sources)."""
        assert self.client is not None
        answer = await self.client.room_messages(room_id, start="", limit=limit)
        assert isinstance(answer, RoomMessagesResponse), answer
        events = [
            e.source
            for e in answer.chunk
            if e.source.get("type") == "m.room.message" and e.source.get("sender") == sender
        ]
        return list(reversed(events))

    async def wait_message(
        self, room_id: str, sender: str, text: str, timeout_s: float = 30, poll_s: float = 0.2
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for event in await self.messages_from(room_id, sender):
                if event["content"].get("body") == text:
                    return event
            await asyncio.sleep(poll_s)
        raise TimeoutError(f"{text!r} from {sender} did not arrive in {room_id} within {timeout_s}s")
