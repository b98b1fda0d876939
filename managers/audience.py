"""Whom the persona is speaking to, and so what it may show them (DESIGN.md §9, "scope by audience").

Every unit of work's managers act for an `Audience` (`Managers(repos, deps, actor=…)`); a tick takes the audience
of the note it answers (managers/conversation.py `ConversationManager.audience_of`), and what the managers read for
it — recall, `memory.search`, core memory, the notepad — is what that audience may see:

| audience | may see |
|---|---|
| the owner, and the persona alone (a free thought) | everything |
| a trusted person | their own conversation, the persona's public identity (IDENTITY.md, SOUL.md, ethics), the memories
marked `shareable` or `shareable:trusted` |
| a guest | their own conversation, the persona's public identity, the memories marked `shareable` |
| a peer (another agent) | as a guest: its own conversation with the persona, the public identity, `shareable` memories
|

A memory is marked by its tags (the owner's, on the Memory page; a note's conversation memory carries its
conversation's tag, `person:<id>` or `peer:<name>`). What a restricted audience may not see is refused with a
reason (`OutOfScope`), never silently emptied, so the persona knows why."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from managers.errors import Refused

SHAREABLE = "shareable"  # a memory any audience may be shown
FOR_TRUSTED = "shareable:trusted"  # a memory the owner's trusted people may be shown


class Role(StrEnum):
    SELF = "self"  # the persona alone: a free thought, its own work (the owner's scope)
    OWNER = "owner"
    TRUSTED = "trusted"
    GUEST = "guest"
    PEER = "peer"


class OutOfScope(Refused):
    """What the audience of this unit may not be shown (a guest's tick asked for the owner's core memory)."""


def conversation_tag(person_id: int | None = None, peer: str | None = None) -> str:
    """The tag a conversation's memories carry: `person:<id>`, or `peer:<name>` for another agent."""
    if person_id is not None:
        return f"person:{person_id}"
    if peer:
        return f"peer:{peer}"
    raise ValueError("a conversation is a person's or a peer's")


@dataclass(frozen=True)
class Audience:
    role: Role = Role.SELF
    person_id: int | None = None
    peer: str | None = None  # a peer's name (an A2A agent, a mesh DID)
    name: str = ""  # how the persona calls them

    @property
    def private(self) -> bool:
        """The owner's scope: everything the persona has."""
        return self.role in (Role.SELF, Role.OWNER)

    @property
    def tag(self) -> str | None:
        """Its conversation's tag (None for the persona alone)."""
        if self.person_id is None and not self.peer:
            return None
        return conversation_tag(self.person_id, self.peer)

    def recall_tags(self) -> list[str] | None:
        """The tags a memory needs (any one of them) to be shown to this audience; None: every memory."""
        if self.private:
            return None
        own = [self.tag] if self.tag else []
        return [*own, SHAREABLE, *([FOR_TRUSTED] if self.role == Role.TRUSTED else [])]

    def may_see(self, tags: list[Any] | tuple[Any, ...] | None) -> bool:
        wanted = self.recall_tags()
        return wanted is None or bool(set(wanted) & {str(t) for t in tags or ()})

    def require_private(self, what: str) -> None:
        """OutOfScope unless this audience sees everything (`what`: "my core memory")."""
        if not self.private:
            raise OutOfScope(f"{what} is not shown while I answer {self.describe()}: only my owner sees it")

    def describe(self) -> str:
        who = self.name or (
            f"peer {self.peer}" if self.peer else f"person {self.person_id}" if self.person_id is not None else ""
        )
        return {
            Role.SELF: "myself",
            Role.OWNER: f"my owner {who}".strip(),
            Role.TRUSTED: f"{who} (trusted)",
            Role.GUEST: f"{who} (a guest)",
            Role.PEER: f"{who} (another agent)",
        }[self.role]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON, as a tick's checkpoint keeps it."""
        return {"role": self.role.value, "person_id": self.person_id, "peer": self.peer, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Audience:
        if not data:
            return ALONE
        try:
            role = Role(str(data.get("role") or "self"))
        except ValueError:
            return ALONE
        person = data.get("person_id")
        return cls(
            role=role,
            person_id=int(person) if person is not None else None,
            peer=data.get("peer") or None,
            name=str(data.get("name") or ""),
        )


ALONE = Audience()
OWNER = Audience(Role.OWNER)  # the owner at their own doors (the web app, the API, MCP, the terminal)

__all__ = ["ALONE", "OWNER", "FOR_TRUSTED", "SHAREABLE", "Audience", "OutOfScope", "Role", "conversation_tag"]
