"""The channel runner: every configured channel, beside the tick loop, in one thread with its own asyncio loop.

Per channel two tasks share the open connection: the inbox (`fetch` from the stored cursor → record every message
through managers.channels → then store the new cursor, in that order: a crash in between fetches a message again,
and the inbox drops the repeat) and the outbox (due rows → `sending`, committed → `already_sent` if an earlier try
may have reached the platform, else `send` → `sent`). A channel that is down (ChannelDown) backs off exponentially
(or as the platform asked), keeps its outbox and records its state (up / backing_off / down, the last error) where
the Controls page reads it. The wait doubles on every failure up to `backoff_max_s` and starts again from
`backoff_initial_s` only once a connection has stayed up for STABLE_S: a channel that connects and then fails at
once (a message it chokes on, a folder that is gone) waits longer each time instead of hammering the server.

One message never stops a channel: one the door cannot read arrives `quarantined`, one whose attachments fail in
a way the runner does not expect is quarantined here, and one the rules cannot record is set aside in a savepoint of
its own (managers.channels `receive_isolated`) — the batch's other messages and the cursor go on.

Out: after the platform accepted a message the row is recorded `sent` at once, and only then does the channel do
what may follow (`Channel.settle`: the e-mail's copy in Sent), so a kill there sends nothing twice. A row found
`sending` again was cut off somewhere between its commit and its recording: `already_sent` asks the platform; a
platform that cannot tell (Telegram) gets it again, and the row says so (`possible duplicate`, kept with its
attempts under the same idempotency key)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from channels.base import Attachment, Channel, ChannelDown, ChannelRefused, Incoming, Outgoing
from channels.kinds import build_channel
from managers import Lazy, ManagerDeps, ManagerFactory, Managers
from managers.channels import Arrival
from managers.speech import engines_for
from memory.clock import utcnow

if TYPE_CHECKING:
    from memory import Database
    from persona.settings import ChannelEntry, Settings
    from reach.speech import SpeechEngines

log = logging.getLogger(__name__)
OUTBOX_POLL_S = 0.25  # the outbox is a table the tick writes from another thread: looked at this often
STABLE_S = 60.0  # a connection up this long resets the backoff
Factory = Callable[["ChannelEntry"], Channel]


class ChannelRunner:
    """Runs `settings.channels.entries` (the enabled ones) until `stop()`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        factory: Factory = build_channel,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db, self.settings, self.factory, self.clock = db, settings, factory, clock
        self.entries = [e for e in settings.channels.entries if e.enabled]
        self._speech: SpeechEngines | None = None  # loaded once for every voice message and spoken reply
        self.managers = ManagerFactory(db, ManagerDeps(settings=settings, clock=clock, speech=Lazy(self._engines)))
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()

    # -- the thread ---------------------------------------------------------------------------------------------

    def start(self) -> ChannelRunner:
        if self.entries and self._thread is None:
            self._thread = threading.Thread(target=self._main, name="anima-channels", daemon=True)
            self._thread.start()
            self._started.wait(10)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _main(self) -> None:
        asyncio.run(self.run())

    async def run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._started.set()
        await asyncio.gather(*(self._keep_running(entry) for entry in self.entries))

    @property
    def stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    async def _sleep(self, seconds: float) -> None:
        assert self._stop is not None
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            pass

    # -- one channel --------------------------------------------------------------------------------------------

    def _engines(self) -> SpeechEngines:
        if self._speech is None:
            self._speech = engines_for(self.settings)
        return self._speech

    def _managers(self, repos: Any) -> Managers:
        return self.managers.over(repos)

    def _status(self, name: str, state: str, error: str | None = None, retry_at: datetime | None = None) -> None:
        with self.db.unit() as repos:
            self._managers(repos).channels.set_status(name, state, error=error, retry_at=retry_at)

    async def _keep_running(self, entry: ChannelEntry) -> None:
        section = self.settings.channels
        backoff = section.backoff_initial_s
        while not self.stopping:
            channel: Channel | None = None
            opened_at: datetime | None = None
            try:
                channel = self.factory(entry)
                await channel.open()
                opened_at = self.clock()
                self._status(entry.name, "up")
                await self._serve(entry, channel)
            except ChannelDown as exc:
                if opened_at is not None and (self.clock() - opened_at).total_seconds() >= STABLE_S:
                    backoff = section.backoff_initial_s
                wait = exc.retry_after_s if exc.retry_after_s is not None else backoff
                log.warning("channel %s is down: %s (again in %.1fs)", entry.name, exc, wait)
                self._status(entry.name, "backing_off", str(exc), self.clock() + timedelta(seconds=wait))
                await self._sleep(wait)
                backoff = min(section.backoff_max_s, backoff * 2)
            except Exception as exc:  # noqa: BLE001 - a channel's bug must not stop the others or the loop
                if opened_at is not None and (self.clock() - opened_at).total_seconds() >= STABLE_S:
                    backoff = section.backoff_initial_s
                log.exception("channel %s failed", entry.name)
                self._status(
                    entry.name, "down", f"{type(exc).__name__}: {exc}", self.clock() + timedelta(seconds=backoff)
                )
                await self._sleep(backoff)
                backoff = min(section.backoff_max_s, backoff * 2)
            finally:
                if channel is not None:
                    try:
                        await channel.close()
                    except Exception:  # noqa: BLE001 - closing a broken connection
                        log.debug("closing %s", entry.name, exc_info=True)
        self._status(entry.name, "stopped")

    async def _serve(self, entry: ChannelEntry, channel: Channel) -> None:
        inbox = asyncio.ensure_future(self._inbox(entry, channel))
        outbox = asyncio.ensure_future(self._outbox(entry, channel))
        assert self._stop is not None
        stop = asyncio.ensure_future(self._stop.wait())
        done, pending = await asyncio.wait({inbox, outbox, stop}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if task is not stop and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _inbox(self, entry: ChannelEntry, channel: Channel) -> None:
        wait_s = self.settings.channels.poll_wait_s
        while not self.stopping:
            with self.db.unit() as repos:
                cursor = self._managers(repos).channels.cursor(entry.name)
            batch = await channel.fetch(cursor, wait_s=wait_s)
            arrivals = [await self._arrival_or_set_aside(entry, channel, m) for m in batch.messages]
            with self.db.unit() as repos:  # the messages and then the cursor, in one transaction
                channels = self._managers(repos).channels
                for arrival in arrivals:
                    channels.receive_isolated(arrival, entry, now=self.clock())
                channels.store_cursor(entry.name, batch.cursor)

    async def _arrival_or_set_aside(self, entry: ChannelEntry, channel: Channel, message: Incoming) -> Arrival:
        try:
            return await self._arrival(entry, channel, message)
        except ChannelDown:
            raise  # the platform itself: the batch is fetched again
        except Exception as exc:  # noqa: BLE001 - one message's attachments must not stop the channel
            log.warning("channel %s: message %s set aside", entry.name, message.platform_id[:80], exc_info=True)
            return Arrival(
                channel=entry.name,
                platform_id=message.platform_id,
                sender=message.sender,
                sender_name=message.sender_name,
                conversation=message.conversation,
                text="",
                sent_at=message.sent_at,
                quarantined=f"could not be read ({type(exc).__name__}: {str(exc)[:300]})",
            )

    async def _arrival(self, entry: ChannelEntry, channel: Channel, message: Incoming) -> Arrival:
        attachments = []
        text = message.text
        for item in message.attachments:
            data = item.data
            if item.kind in ("text", "audio") and data is None and 0 < item.size <= entry.max_attachment_bytes:
                try:
                    data = await channel.download(item, max_bytes=entry.max_attachment_bytes)
                except (ChannelRefused, ChannelDown) as exc:
                    log.info("channel %s: attachment %s kept by reference: %s", entry.name, item.name, exc)
            described = _attachment(item, data)
            if item.kind == "audio" and data is not None:
                heard = await self._transcribe(entry, data, item.mime)
                if heard:
                    text = f"{text}\n{heard}".strip()
                    described["transcribed"] = True
                    described.pop("data", None)  # the words went into the note; the audio stays a reference
            attachments.append(described)
        return Arrival(
            channel=entry.name,
            platform_id=message.platform_id,
            sender=message.sender,
            sender_name=message.sender_name,
            conversation=message.conversation,
            text=text,
            sent_at=message.sent_at,
            attachments=tuple(attachments),
            unverified=message.unverified,
            quarantined=message.quarantined,
            private=message.private,
        )

    async def _transcribe(self, entry: ChannelEntry, data: bytes, mime: str) -> str | None:
        """A voice message's words (managers/speech.py); None — the audio stays a reference — when it could not be
        heard (no model, undecodable, over the size cap)."""

        def hear() -> str:
            with self.db.unit() as repos:
                return str(self._managers(repos).speech.transcribe(data, mime, language_hint=None).text)

        try:
            return (await asyncio.to_thread(hear)).strip() or None
        except Exception as exc:  # noqa: BLE001 - refused, undecodable, no model: kept by reference
            log.info("channel %s: a voice message kept by reference: %s", entry.name, exc)
            return None

    def _spoken(self, row_id: int) -> bytes | None:
        with self.db.unit() as repos:
            return self._managers(repos).channels.spoken_reply(row_id)

    async def _outbox(self, entry: ChannelEntry, channel: Channel) -> None:
        while not self.stopping:
            with self.db.unit() as repos:
                due = [row.id for row in self._managers(repos).channels.due(entry.name, self.clock())]
            for row_id in due:
                await self._deliver(channel, row_id)
            await self._sleep(OUTBOX_POLL_S)

    async def _deliver(self, channel: Channel, row_id: int) -> None:
        with self.db.unit() as repos:  # `sending` is committed before the platform hears of it
            row = self._managers(repos).channels.begin_send(row_id)
            if row is None:
                return
            tried_before = (row.attempts or 0) > 1
            message = Outgoing(
                idempotency_key=row.idempotency_key,
                recipient=row.recipient,
                text=row.text,
                conversation=row.conversation,
                reply_to=row.reply_to,
            )
        audio = await asyncio.to_thread(self._spoken, row_id)
        if audio is not None:
            message = replace(message, audio=audio)
        try:
            platform_id = await channel.already_sent(message) if tried_before else None
            if platform_id is None:
                if tried_before and not channel.can_tell_sent:
                    with self.db.unit() as repos:
                        self._managers(repos).channels.mark_possible_duplicate(row_id)
                platform_id = await channel.send(message)
        except ChannelRefused as exc:
            with self.db.unit() as repos:
                self._managers(repos).channels.mark_failed(row_id, str(exc))
            return
        except ChannelDown as exc:
            with self.db.unit() as repos:
                self._managers(repos).channels.note_error(row_id, str(exc))
            raise
        with self.db.unit() as repos:
            self._managers(repos).channels.mark_sent(row_id, platform_id, self.clock())
        try:
            await channel.settle(message, platform_id)
        except Exception:  # noqa: BLE001 - the message went out and is recorded; only what follows it failed
            log.warning("channel %s: after sending %s", channel.name, platform_id, exc_info=True)


def _attachment(item: Attachment, data: bytes | None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": item.kind, "name": item.name, "mime": item.mime, "size": item.size, "ref": item.ref}
    if data is not None:
        out["data"] = data
    return out
