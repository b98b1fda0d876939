from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from web.schemas.requests import JSON_NUMBER, REQUEST_BODY, VISIBLE


class NoteIn(BaseModel):
    model_config = REQUEST_BODY
    text: str = Field(min_length=1, max_length=8000, pattern=VISIBLE, description="What to tell the persona.")
    priority: Annotated[int, Field(ge=0, le=10), JSON_NUMBER] = Field(1, description="Higher is more urgent.")
    tags: list[str] = Field(default_factory=list, max_length=16)


Door = Literal["web", "api", "mcp", "voice", "cli", "matrix", "telegram", "email", "channel", "a2a", "mesh"]


class ConversationItem(BaseModel):
    id: int
    who: Literal["human", "persona"]
    text: str
    at: datetime
    person: str | None = Field(
        None,
        description=(
            "Whose conversation it is: a person's id, or `peer:<name>` for another agent (the persona's message: its "
            "recipient's)."
        ),
    )
    name: str | None = Field(None, description="Who wrote it (a human's note), or whom the persona wrote to.")
    role: Literal["owner", "trusted", "guest", "peer"] | None = None
    door: Door | None = Field(None, description="How it came or went: the page, the API, MCP, a channel, A2A, …")
    read: bool = True
    unprompted: bool = False
    drive: str | None = Field(None, description="For an unprompted message: the drive that moved the persona to write.")
    drive_level: float | None = None
    llm_id: str | None = None
    spoken: bool = Field(False, description="A human note that came as a voice message (its text is the transcript).")
    speakable: bool = Field(
        False,
        description=(
            "A persona's message offered as audio (speech.answer_in_speech): GET /api/talk/speech/{id} plays it."
        ),
    )


class VoiceNoteOut(BaseModel):
    note: ConversationItem
    transcript: str
    language: str = Field(description="ISO 639-1: detected, or as hinted")
    seconds: float = Field(description="The audio's length")


class Conversation(BaseModel):
    persona: str
    items: list[ConversationItem]
    waiting: int = Field(description="Human notes the persona has not read yet.")
    person: str | None = Field(None, description="The thread shown (a person's id, `peer:<name>`); none: every one.")


class ThreadOut(BaseModel):
    """One conversation: a person's (by every door) or a peer's."""

    person: str = Field(description="A person's id, or `peer:<name>`: what `GET /api/conversation?person=` takes.")
    name: str
    role: Literal["owner", "trusted", "guest", "peer"]
    door: Door | None = Field(None, description="The door of its newest turn.")
    last_text: str
    last_at: datetime
    unread: int = Field(description="Their notes the persona has not read yet.")
    turns: int


class Threads(BaseModel):
    threads: list[ThreadOut]
    waiting: dict[str, int] = Field(
        description=(
            "What waits for the owner: contact requests (`contacts`), approvals, messages a channel refused "
            "(`refused`), unread notes (`unread`)."
        )
    )
