"""Talk: the conversation (the human's notes, the persona's messages, unprompted ones with the drive behind them)."""

from __future__ import annotations

from datetime import datetime, timezone

from managers import Managers
from memory import Repos
from memory.repositories.notes import HUMAN_SOURCES
from web.schemas.talk import Conversation, ConversationItem, NoteIn


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _item(note, offers: list[tuple[datetime, datetime, dict]]) -> ConversationItem:
    human = note.source in HUMAN_SOURCES
    at = _utc(note.created_at)
    offer = None if human else next((o for start, end, o in offers if start <= at <= end), None)
    return ConversationItem(id=note.id, who="human" if human else "persona", text=note.text, at=at, read=note.read,
                            unprompted=offer is not None, drive=offer and offer.get("drive"),
                            drive_level=offer and offer.get("level"), llm_id=note.llm_id)


def _offers(repos: Repos) -> list[tuple[datetime, datetime, dict]]:
    """The ticks in which a drive offered the persona to write unprompted (persona/drives.py)."""
    windows = []
    for offer in repos.config.reach_outs[-50:]:
        tick = repos.ticks.get(offer.get("thread") or "main", int(offer.get("tick") or 0))
        if tick is not None:
            end = tick.finished_at or datetime.now(timezone.utc)
            windows.append((_utc(tick.started_at), _utc(end), offer))
    return windows


def conversation(repos: Repos, persona_name: str, *, limit: int = 50, after_id: int | None = None) -> Conversation:
    rows = [n for n in repos.notes.list(limit=limit * 4, after_id=after_id)
            if n.source in HUMAN_SOURCES or (n.source == "llm" and "outgoing" in (n.tags or []))][-limit:]
    offers = _offers(repos) if any(n.source == "llm" for n in rows) else []
    waiting = len(repos.notes.human_after(0, read=False, limit=100))
    return Conversation(persona=persona_name, items=[_item(n, offers) for n in rows], waiting=waiting)


def post_note(repos: Repos, note: NoteIn, now: datetime) -> ConversationItem:
    owner = Managers(repos).people.owner()  # the web page (and the MCP client) is the owner's own door
    row = repos.notes.add(note.text.strip(), source="user", priority=note.priority, tags=list(note.tags),
                          created_at=now, author_id=owner.id)
    return _item(row, [])
