"""The personas of a deployment (graph/fleet/): which should be thinking, and where each last thought."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class PersonaEntry(BaseModel):
    name: str = Field(description="Its name in the deployment; its pages are under /p/<name>/.")
    display_name: str
    state: Literal["active", "paused"]
    playbook: str
    ticks: int = Field(description="Ticks its jobs ran.")
    last_tick_at: str | None = None
    last_worker: str | None = Field(None, description="host:pid of the worker that ran its last tick")
    next_tick_at: str | None = None
    url: str = Field(description="Its Talk page.")


class PersonaList(BaseModel):
    personas: list[PersonaEntry]
