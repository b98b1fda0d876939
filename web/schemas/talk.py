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


class ConversationItem(BaseModel):
    id: int
    who: Literal["human", "persona"]
    text: str
    at: datetime
    read: bool = True
    unprompted: bool = False
    drive: str | None = Field(None, description="For an unprompted message: the drive that moved the persona to write.")
    drive_level: float | None = None
    llm_id: str | None = None


class Conversation(BaseModel):
    persona: str
    items: list[ConversationItem]
    waiting: int = Field(description="Human notes the persona has not read yet.")
