from __future__ import annotations

from pydantic import BaseModel, Field

from persona.loader import FILE_CAP, TOTAL_CAP
from web.schemas.requests import REQUEST_BODY


class PersonaFile(BaseModel):
    name: str
    text: str
    chars: int
    cap: int = Field(description="The most characters the loader reads of it.")
    exists: bool = True


class FileIn(BaseModel):
    model_config = REQUEST_BODY
    text: str = Field(max_length=200_000)


class PersonaFileIn(BaseModel):
    model_config = REQUEST_BODY
    text: str = Field(
        max_length=FILE_CAP,
        description=f"The file's whole text (the bootstrap files together hold at most {TOTAL_CAP:,} characters).",
    )


class ConfigFile(BaseModel):
    text: str
    name: str = Field(description="The persona's name, as the settings read it.")


class Seed(BaseModel):
    name: str
    text: str
    chars: int


class SeedSummary(BaseModel):
    name: str
    chars: int
    preview: str


class SeedList(BaseModel):
    current: str = Field(description="seed.txt as it is now.")
    items: list[SeedSummary]


class SeedIn(BaseModel):
    model_config = REQUEST_BODY
    text: str | None = Field(None, max_length=20_000, description="The seed's text; omitted: the current seed.txt.")


class Skill(BaseModel):
    name: str
    description: str
    invocation: str
    directory: str = Field(description="Its directory under skills/.")
    own: bool = Field(description="In the persona's own skills/ (False: shipped with anima; saving makes it its own).")
    text: str = Field(description="SKILL.md as it is on disk.")


class SkillIn(BaseModel):
    model_config = REQUEST_BODY
    text: str = Field(min_length=1, max_length=30_000, description="The whole SKILL.md, frontmatter included.")


class Edit(BaseModel):
    at: str
    what: str
    by: str = "human (web)"


class PersonaOverview(BaseModel):
    name: str
    directory: str
    editable: bool = Field(
        description="False for the shipped default persona: the first edit copies it into the data dir."
    )
    files: list[PersonaFile]
    truncated: list[str] = Field(default_factory=list, description="What the loader cut or left out.")
    skills: list[str]
    seeds: list[str]
    edits: list[Edit] = Field(default_factory=list, description="The human's recent edits, newest first.")


class Created(BaseModel):
    name: str
    persona_dir: str
    data_dir: str | None = None
    files: list[str]
    command: str = Field(description="How to run it.")
