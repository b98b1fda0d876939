"""The persona's inner life as the owner sees and touches it: its drives (computed from what happened, the owner's
adjustments fading back to them) and its open questions (the owner may resolve or delete one)."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from managers.views import frozen, frozen_all
from persona.drives import Drives, adjust_drive, adjustment_history, compute_drives

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import DriveSettings


@dataclass(frozen=True)
class OpenQuestionView:
    """What the persona wants to know (the source of its curiosity drive), and how it was answered."""

    id: int
    topic: str
    context: str
    priority: float  # 0..1
    source: str  # dream | command | conversation
    status: str  # open | resolved
    resolution: str | None
    created_at: datetime
    resolved_at: datetime | None


class InnerLifeManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- emotions ------------------------------------------------------------------------------------------------------

    def emotion_vocabulary(self) -> builtins.list[str]:
        """The emotions the persona names its feelings with: config.yaml's, and what it added since."""
        return list(self.repos.config.emotion_vocabulary or self.house.deps.settings.emotions)

    def extend_emotion_vocabulary(
        self, vocabulary: builtins.list[str], new: builtins.list[str], *, thread_id: str
    ) -> None:
        """Emotions a rating named that the vocabulary lacked join it; the process log says which."""
        self.repos.config.emotion_vocabulary = vocabulary + new
        self.repos.processes.add(
            "emotions.vocabulary",
            f"new emotion(s) added to my vocabulary: {', '.join(new)}",
            status="close",
            thread_id=thread_id,
        )

    # -- drives --------------------------------------------------------------------------------------------------------

    def drives(self, now: datetime, config: DriveSettings | None = None) -> Drives:
        """The four drives at `now`, since the persona started (its first root thread)."""
        config = config if config is not None else self.house.deps.settings.drives
        return compute_drives(self.repos, now, config, since=self.house.journal.started_at())

    def adjustments(self) -> builtins.list[dict[str, Any]]:
        """The owner's changes to the drives, newest last."""
        return adjustment_history(self.repos)

    def adjust(
        self, name: str, level: float, now: datetime, *, by: str, computed: float | None = None
    ) -> dict[str, Any]:
        """A drive set to `level`: in force at once, fading back to the computed level (UnknownDrive for a bad name)."""
        return adjust_drive(self.repos, name, level, now, by=by, computed=computed)

    # -- open questions ------------------------------------------------------------------------------------------------

    def questions(self, limit: int = 200) -> builtins.list[OpenQuestionView]:
        return frozen_all(OpenQuestionView, self.repos.questions.list(limit))

    def question(self, question_id: int) -> OpenQuestionView:
        """The question (NotFound if there is none)."""
        return frozen(OpenQuestionView, self.repos.questions.get(question_id))

    def resolve_question(self, question_id: int, resolution: str, now: datetime) -> OpenQuestionView:
        return frozen(OpenQuestionView, self.repos.questions.resolve(question_id, resolution, now))

    def delete_question(self, question_id: int) -> None:
        self.repos.questions.purge(question_id)


__all__ = ["InnerLifeManager", "OpenQuestionView"]
