"""What a note is: who wrote it (`NoteSource`, the `notes.source` column) and by which door it came (`Door`, the
`notes.door` column). Every writer of a note names one of these; no module spells a source as a bare string.

The stored values of `NoteSource` are the ones older databases hold ("user" is the owner's own page), so a row
written by any version reads the same."""

from __future__ import annotations

from enum import StrEnum


class NoteSource(StrEnum):
    HUMAN_PAGE = "user"  # a human at the web page, the API, an MCP client, a voice message there
    HUMAN_TERMINAL = "cli"  # `run.py say`
    HUMAN_CHANNEL = "channel"  # a person over Matrix, Telegram, e-mail
    PEER = "peer"  # another agent (A2A, the mesh): its name in the tag `from:<peer>`
    PERSONA = "llm"  # the persona's own note, or a message it sent (tagged `outgoing`)
    TASK = "llm:task"  # the persona's note from a task's sub-cycle, for the main loop
    OTHER_MODEL = "llm_task"  # another model's answer to a question the persona sent it
    SYSTEM = "system"  # the loop's own word (a task cycle ended, …)
    FEED = "feed"  # an item of a subscribed feed


class Door(StrEnum):
    """How a note reached the persona (and so how an answer goes back)."""

    WEB = "web"  # the Talk page
    API = "api"  # POST /api/notes
    MCP = "mcp"  # an MCP client's post_note
    VOICE = "voice"  # push-to-talk on the Talk page (/api/talk/voice)
    CLI = "cli"  # run.py say
    MATRIX = "matrix"
    TELEGRAM = "telegram"
    EMAIL = "email"
    CHANNEL = "channel"  # a channel of another kind (its name in the note's `via:` tag)
    A2A = "a2a"  # another agent over A2A
    MESH = "mesh"  # a peer's signed container on the mesh


HUMAN_SOURCES: tuple[NoteSource, ...] = (NoteSource.HUMAN_PAGE, NoteSource.HUMAN_TERMINAL, NoteSource.HUMAN_CHANNEL)
OWNER_SOURCES: tuple[NoteSource, ...] = (NoteSource.HUMAN_PAGE, NoteSource.HUMAN_TERMINAL)  # the owner's own doors
OWN_SOURCES: tuple[NoteSource, ...] = (NoteSource.PERSONA, NoteSource.TASK)  # what the persona wrote itself
INCOMING_SOURCES: tuple[NoteSource, ...] = (
    *HUMAN_SOURCES,
    NoteSource.SYSTEM,
    NoteSource.TASK,
    NoteSource.OTHER_MODEL,
    NoteSource.PEER,
)
CHANNEL_DOORS: tuple[Door, ...] = (Door.MATRIX, Door.TELEGRAM, Door.EMAIL, Door.CHANNEL)
PEER_DOORS: tuple[Door, ...] = (Door.A2A, Door.MESH)

SOURCE_OF_DOOR: dict[Door, NoteSource] = {
    Door.WEB: NoteSource.HUMAN_PAGE,
    Door.API: NoteSource.HUMAN_PAGE,
    Door.MCP: NoteSource.HUMAN_PAGE,
    Door.VOICE: NoteSource.HUMAN_PAGE,
    Door.CLI: NoteSource.HUMAN_TERMINAL,
    **{door: NoteSource.HUMAN_CHANNEL for door in CHANNEL_DOORS},
    **{door: NoteSource.PEER for door in PEER_DOORS},
}


def door_of(source: str, tags: list[str] | None) -> Door | None:
    """The door of a note written before notes kept theirs: from its source and its `via:` tag."""
    via = next((t[4:] for t in tags or [] if isinstance(t, str) and t.startswith("via:")), None)
    if via is not None:
        try:
            return Door(via)
        except ValueError:
            pass
    return (
        {
            NoteSource.HUMAN_PAGE: Door.WEB,
            NoteSource.HUMAN_TERMINAL: Door.CLI,
            NoteSource.HUMAN_CHANNEL: Door.CHANNEL,
            NoteSource.PEER: Door.A2A,
        }.get(NoteSource(source))
        if source in NoteSource._value2member_map_
        else None
    )


__all__ = [
    "CHANNEL_DOORS",
    "Door",
    "HUMAN_SOURCES",
    "INCOMING_SOURCES",
    "NoteSource",
    "OWNER_SOURCES",
    "OWN_SOURCES",
    "PEER_DOORS",
    "SOURCE_OF_DOOR",
    "door_of",
]
