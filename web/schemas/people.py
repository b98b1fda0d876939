"""The persona's humans (People page, /api/people), their contact requests, and the channels' state (Controls)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from web.schemas.requests import REQUEST_BODY, VISIBLE

Role = Literal["owner", "trusted", "guest"]
NAME = Field(min_length=1, max_length=120, pattern=f"{VISIBLE}")
# HH:MM-HH:MM (the end may be 24:00), in ASCII classes: the JSON Schema's (ECMA) regex and Python's agree
QUIET = r"^([01]?[0-9]|2[0-3]):[0-5][0-9]-([01]?[0-9]|2[0-4]):[0-5][0-9]$"


class Identity(BaseModel):
    channel: str
    address: str


class Person(BaseModel):
    id: int
    name: str
    role: Role = Field(description="owner (answers approvals and contact requests), trusted or guest.")
    preferred_channel: str | None = Field(None, description="Where messages to them go; none: where they last wrote.")
    language: str | None = None
    quiet_hours: str | None = Field(None, description="HH:MM-HH:MM: unprompted messages wait past it.")
    about: str = ""
    added_by: str
    identities: list[Identity] = Field(default_factory=list)
    last_channel: str | None = Field(None, description="The channel they last wrote from.")
    groups: list[str] = Field(default_factory=list, description="The groups they are in (HMP users_group).")


class Forgotten(BaseModel):
    """What deleting a person did."""

    name: str
    notes: int = Field(description="Their notes, and the persona's notes to them, deleted for good.")
    memories: int = Field(description="The conversation memories made of them, forgotten (text, index, vector).")
    directory: dict[str, int] = Field(description="Their identities, groups, contact requests, inbox and outbox rows.")
    sources: int = Field(description="Quoted excerpts of their words (provenance) emptied.")
    placeholders: list[str] = Field(description="What their name is elsewhere in memory now.")


class Group(BaseModel):
    name: str
    description: str = ""
    members: list[str] = Field(default_factory=list)


class GroupIn(BaseModel):
    model_config = REQUEST_BODY
    name: str = Field(min_length=1, max_length=120, pattern=f"{VISIBLE}")
    description: str = Field("", max_length=2000)


class ContactRequest(BaseModel):
    id: int
    channel: str
    address: str
    sender_name: str
    warning: str = Field(
        "",
        description="What the owner should know: e.g. the sender claims someone's address but failed authentication.",
    )
    status: Literal["pending", "accepted", "refused"]
    messages: int = Field(description="How many messages wait held (none reached a note or memory).")
    requested_at: str | None = None
    claims: str | None = Field(
        None,
        description="The known person whose address this sender used without passing "
        "authentication: it cannot be accepted as them (refuse it; the owner may vouch for "
        "mail claiming their own address).",
    )
    claims_role: str | None = None
    unverified: str = Field("", description="Why the channel could not vouch for the sender (e.g. dkim=none).")
    lookalike: str = Field(
        "",
        description="Why the sender may pose as someone known (impostor risk): its display "
        "name reads as a known person's, or shows a known address.",
    )
    dropped: int = Field(0, description="Their messages dropped over the channel's hold caps (none kept).")
    held: list[str] = Field(default_factory=list, description="The held texts, for the owner to read.")
    can_accept: bool = True
    can_vouch: bool = False


class SetAside(BaseModel):
    channel: str
    sender: str = Field(description="The From (or sender) as written: not believed, only shown.")
    reason: str
    received_at: str | None = None


class ChannelState(BaseModel):
    channel: str
    state: str = Field(description="up, backing_off, down or stopped, as its runner last recorded it.")
    last_error: str | None = None
    retry_at: str | None = None
    outbox_depth: int = Field(description="Messages queued or being sent.")


class PeopleOverview(BaseModel):
    people: list[Person]
    contact_requests: list[ContactRequest]
    channels: list[ChannelState]
    dropped_messages: int = Field(
        0, description="Strangers' messages dropped because the waiting contact requests were at their cap (none kept)."
    )
    dropped_senders: int = 0
    set_aside: list[SetAside] = Field(
        default_factory=list,
        description="The newest messages a channel could not read: set aside, nothing of them kept.",
    )
    set_aside_total: int = 0


class PersonIn(BaseModel):
    model_config = REQUEST_BODY
    name: str = NAME
    role: Role = "guest"
    preferred_channel: str | None = Field(None, max_length=64)
    language: str | None = Field(None, max_length=16)
    quiet_hours: str | None = Field(None, pattern=QUIET)
    about: str = Field("", max_length=2000)
    channel: str | None = Field(None, max_length=64, description="With `address`: their identity on a channel.")
    address: str | None = Field(None, max_length=300)


class PersonUpdate(BaseModel):
    model_config = REQUEST_BODY
    name: str | None = Field(None, min_length=1, max_length=120, pattern=f"{VISIBLE}")
    role: Role | None = None
    preferred_channel: str | None = Field(None, max_length=64)
    language: str | None = Field(None, max_length=16)
    quiet_hours: str | None = Field(None, pattern=QUIET)
    about: str | None = Field(None, max_length=2000)
    channel: str | None = Field(None, max_length=64)
    address: str | None = Field(None, max_length=300)


class AcceptIn(BaseModel):
    model_config = REQUEST_BODY
    name: str | None = Field(
        None,
        min_length=1,
        max_length=120,
        pattern=f"{VISIBLE}",
        description="An existing person who gets this identity, or the new person's name.",
    )
    role: Literal["trusted", "guest"] = "guest"
