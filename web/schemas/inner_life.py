"""Inner life (Nexus Ark's introspection dashboard): the drives and the human's settings of them, the open questions,
the plots over time, and the layers of the last prompt."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from web.schemas.requests import JSON_NUMBER, REQUEST_BODY, VISIBLE


class DriveLevelIn(BaseModel):
    model_config = REQUEST_BODY
    level: Annotated[float, Field(ge=0, le=1), JSON_NUMBER] = Field(
        description="The level to set; it fades back to the computed one."
    )


class DriveAdjustment(BaseModel):
    level: float = Field(description="The level the human set.")
    computed: float | None = Field(None, description="The drive's own level at the time.")
    weight: float | None = Field(None, description="How much of the setting still holds (1 at first, then halving).")
    at: str
    by: str = "human"


class AdjustmentRecord(BaseModel):
    drive: str
    level: float
    at: str
    by: str = "human"
    computed: float | None = None


class DriveView(BaseModel):
    name: str
    label: str
    level: float = Field(description="The level in force (with the human's setting, fading).")
    computed: float = Field(description="The level from the persona's own state alone.")
    adjusted: DriveAdjustment | None = None
    context: str = Field(description="What moves the drive, in the persona's words (as the prompt shows it).")
    in_prompt: bool = Field(description="At or above inject_at: the next prompt shows it.")


class DrivesView(BaseModel):
    at: str
    drives: list[DriveView]
    dominant: str
    dominant_level: float
    dominant_context: str
    inject_at: float
    reach_out_at: float
    adjustment_half_life_hours: float
    history: list[AdjustmentRecord] = Field(description="The human's changes, newest first.")


class QuestionView(BaseModel):
    id: int
    topic: str
    context: str = ""
    priority: float
    source: str
    status: str
    resolution: str | None = None
    created_at: datetime | None = None
    resolved_at: datetime | None = None


class QuestionList(BaseModel):
    questions: list[QuestionView] = Field(description="Open ones first (by priority), then the resolved.")
    open: int


class ResolutionIn(BaseModel):
    model_config = REQUEST_BODY
    resolution: str = Field(min_length=1, max_length=1000, pattern=VISIBLE, description="The answer, in a few words.")


class Series(BaseModel):
    label: str
    values: list[float | None] = Field(description="One per x; None where this series has no point.")
    points_only: bool = False


class Chart(BaseModel):
    key: str
    title: str
    y_label: str
    x: list[float] = Field(description="Unix seconds, ascending.")
    series: list[Series]


class Charts(BaseModel):
    emotions: Chart
    novelty: Chart
    tokens: Chart
    valence: dict[str, float] = Field(
        description="emotion → valence (−1 … 1) used for the emotions plot; emotions not in it are left out."
    )


class PromptLayer(BaseModel):
    layer: str
    items: int
    tokens: int
    system: bool
    share: float | None = Field(None, description="Its share of the prompt budget.")


class PromptLayers(BaseModel):
    thread: str | None = None
    tick: int | None = Field(None, description="The tick whose prompt this was (None: no tick yet).")
    at: datetime | None = None
    window_tokens: int | None = None
    budget_tokens: int | None = None
    max_tokens: int | None = Field(None, description="Kept for the answer.")
    used_tokens: int = 0
    layers: list[PromptLayer] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list, description="What did not fit the budget.")
