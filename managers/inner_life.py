"""The persona's inner life as the owner sees and touches it: its drives (computed from what happened, the owner's
adjustments fading back to them) and its open questions (the owner may resolve or delete one)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from managers.views import frozen, frozen_all
from persona.drives import (
    Drives,
    adjust_drive,
    adjustment_history,
    compute_drives,
    reach_out_offer,
    touched_questions,
)

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import DriveSettings

MAX_OFFERS_KEPT = 20  # the reach-out offers remembered (the newest)


@dataclass(frozen=True)
class Felt:
    """A human's note and the emotion it was felt to carry ((name, intensity, …); None or neutral: nothing logged)."""

    note_id: int
    text: str
    created_at: datetime
    emotion: tuple[Any, ...] | None


@dataclass(frozen=True)
class ToSettle:
    """A conversation (the human's notes the persona read, and its last replies) and the open questions it touches:
    the model is asked which it settled."""

    conversation: str
    questions: Sequence[Any]
    last_note_id: int


@dataclass(frozen=True)
class Stock:
    """The drives now, how many resolved questions went, and the reach-out offer the one rule allowed (None: the
    reason it did not, `why_not`)."""

    drives: Drives
    purged: int
    offer: dict[str, Any] | None
    why_not: str | None


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

    # -- the tick's stock-taking (nodes/steps/s02_update_drives.py) -----------------------------------------------

    def preload_tick(self) -> None:
        """What the stock-taking reads of the config table, in one statement (the tick's snapshot)."""
        self.repos.config.preload_drives()

    def notes_to_feel(self, since: datetime, limit: int) -> builtins.list[tuple[int, str, datetime]]:
        """The human's notes not yet felt (after the emotion pointer), newer than `since`: (id, text, created_at)."""
        pointer = self.repos.config.emotion_note_pointer
        return [
            (n.id, n.text, n.created_at) for n in self.repos.notes.human_after_lines(pointer, since=since, limit=limit)
        ]

    def felt(self, felt: Sequence[Felt], *, thread_id: str, tick: int) -> None:
        """What the human's notes were felt to carry, in the emotion log (neutral ones left out); the pointer moves
        past them all."""
        for note in felt:
            if note.emotion and note.emotion[0] != "neutral":
                self.repos.emotion_log.add(
                    note.emotion[0],
                    note.emotion[1],
                    subject="user",
                    snippet=note.text,
                    thread_id=thread_id,
                    tick=tick,
                    created_at=note.created_at,
                )
        if felt:
            self.repos.config.emotion_note_pointer = felt[-1].note_id

    def to_settle(self, thread_id: str, *, since: datetime, user: str, name: str) -> ToSettle | None:
        """After a conversation (the human's notes read since the resolution pointer, newer than `since`, and the
        persona's last two replies), the open questions it touches (a content word shared); None when there is
        nothing to ask — then, when no question is touched, the pointer moves past the notes."""
        notes = self.repos.notes.human_after_lines(
            self.repos.config.resolution_note_pointer, read=True, since=since, limit=10
        )
        if not notes:
            return None
        questions = self.repos.questions.open_lines(limit=10)
        replies = (  # the notes were read (answered) last tick
            [m.content for m in self.repos.messages.recent_lines(thread_id, 2, columns=("content",))]
            if questions
            else []
        )
        conversation = "\n".join([f"{user}: {n.text}" for n in notes] + [f"{name}: {r[-600:]}" for r in replies])
        touched = touched_questions(conversation, questions)
        if not touched:  # no question open, or none the conversation touches: nothing to ask
            self.repos.config.resolution_note_pointer = notes[-1].id
            return None
        return ToSettle(conversation, touched, notes[-1].id)

    def settle(
        self, verdict: Sequence[tuple[int, str]], *, last_note_id: int, thread_id: str, now: datetime
    ) -> builtins.list[int]:
        """The open questions the model found the conversation settled, resolved (a process-log line says which);
        the pointer moves past the conversation."""
        for qid, answer in verdict:
            self.repos.questions.resolve(qid, answer, now)
        if verdict:
            self.repos.processes.add(
                "drives.questions",
                "resolved in conversation: " + "; ".join(f"{qid}: {answer[:80]}" for qid, answer in verdict),
                status="close",
                thread_id=thread_id,
            )
        self.repos.config.resolution_note_pointer = last_note_id
        return [qid for qid, _ in verdict]

    def take_stock(
        self,
        now: datetime,
        *,
        started: datetime | None,
        thread_id: str,
        tick: int,
        human_waiting: Callable[[], bool],
    ) -> Stock:
        """The drives now (since the persona `started`), the resolved questions past `drives.resolved_keep_days`
        purged, and the reach-out offer if the one rule allows it (persona/drives.py `reach_out_offer`: not while
        `human_waiting()`, not in quiet hours, not again too soon) — then remembered (once per tick) and told in the
        process log."""
        settings = self.house.deps.settings
        config = settings.drives
        purged = self.repos.questions.purge_resolved(now - timedelta(days=config.resolved_keep_days))
        drives = compute_drives(self.repos, now, config, since=started)
        offers = self.repos.config.reach_outs
        last_offer = datetime.fromisoformat(offers[-1]["at"]) if offers else None
        why_not = reach_out_offer(
            drives,
            now,
            settings.zone(),
            config,
            quiet_hours=settings.dreaming.quiet_hours,  # one quiet-hours setting for both
            human_waiting=human_waiting(),
            last_offer_at=last_offer,
        )
        offer: dict[str, Any] | None = None
        if why_not is None:
            offer = {
                "at": now.isoformat(),
                "tick": tick,
                "thread": thread_id,
                "drive": drives.dominant,
                "level": drives.dominant_level,
            }
            if not offers or offers[-1].get("tick") != tick or offers[-1].get("thread") != thread_id:  # a re-run
                self.repos.config.reach_outs = (offers + [offer])[-MAX_OFFERS_KEPT:]
            self.repos.processes.add(
                "drives.reach_out",
                f"{drives.dominant} {drives.dominant_level:.2f}: the persona may write to its human unprompted",
                status="close",
                thread_id=thread_id,
            )
        return Stock(drives, purged, offer, why_not)

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


__all__ = ["MAX_OFFERS_KEPT", "Felt", "InnerLifeManager", "OpenQuestionView", "Stock", "ToSettle"]
