"""One command model for all three syntaxes (HMP block, Epos <tool_call>, native tool calls)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Command(BaseModel):
    cmd_id: str
    type: str  # family.verb
    args: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    syntax: str = "hmp"  # hmp | tool_call | native

    @property
    def family(self) -> str:
        return self.type.split(".", 1)[0]

    @property
    def verb(self) -> str:
        return self.type.split(".", 1)[1] if "." in self.type else ""
