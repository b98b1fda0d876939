"""Inner life (Nexus Ark's introspection dashboard): the four drives, which the human may set (persona/drives.py
records the setting and fades it back); the dominant drive's context; the open questions, resolved or deleted by
hand; emotions, novelty and tokens over time; and the layers of the last prompt with what its budget dropped."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from i18n import N_
from managers import Managers
from managers.errors import NotFound
from managers.goals import GoalMetrics
from memory.clock import as_utc
from memory.text import emotion_strengths
from persona.drives import DRIVES, LABELS, UnknownDrive, describe
from persona.settings import Settings
from web.errors import NotFoundError, ServiceError
from web.schemas.inner_life import (
    AdjustmentRecord,
    Chart,
    Charts,
    DriveAdjustment,
    DriveLevelIn,
    DrivesView,
    DriveView,
    PromptLayer,
    PromptLayers,
    QuestionList,
    QuestionView,
    ResolutionIn,
    Series,
)

if TYPE_CHECKING:
    from managers.inner_life import OpenQuestionView

# emotion → valence (−1 unpleasant … 1 pleasant). The human's emotions follow Nexus Ark (joy 1.0, neutral 0,
# sadness −0.6, anger −1.0); the persona's own are rated freely, so the common ones are mapped too. A thought's
# point is the strength-weighted mean of its mapped emotions; an emotion not in the table is left out.
VALENCE: dict[str, float] = {
    "joy": 1.0,
    "happy": 0.8,
    "happiness": 0.8,
    "love": 0.9,
    "gratitude": 0.8,
    "excitement": 0.8,
    "delight": 0.9,
    "amusement": 0.7,
    "inspiration": 0.7,
    "hope": 0.6,
    "pride": 0.6,
    "contentment": 0.6,
    "awe": 0.6,
    "wonder": 0.6,
    "curiosity": 0.5,
    "interest": 0.5,
    "calm": 0.4,
    "relief": 0.5,
    "surprise": 0.3,
    "anticipation": 0.3,
    "neutral": 0.0,
    "confusion": -0.2,
    "busy": -0.2,
    "boredom": -0.3,
    "tired": -0.4,
    "nervousness": -0.5,
    "disappointment": -0.5,
    "sadness": -0.6,
    "loneliness": -0.6,
    "worry": -0.6,
    "stress": -0.6,
    "stressed": -0.6,
    "guilt": -0.6,
    "alarm": -0.6,
    "anxious": -0.7,
    "anxiety": -0.7,
    "frustration": -0.7,
    "shame": -0.7,
    "fear": -0.8,
    "dread": -0.8,
    "disgust": -0.8,
    "panic": -0.9,
    "anger": -1.0,
}
THOUGHT_KINDS = ("response", "continuation")
LAYERS_LOOKBACK = 20  # ticks searched for the last prompt's layers (a degraded or failed tick has none)


# -- drives ---------------------------------------------------------------------------------------------------


def drives_view(house: Managers, settings: Settings, now: datetime) -> DrivesView:
    config = settings.drives
    drives = house.inner_life.drives(now, config)
    views = []
    for name in DRIVES:
        detail = drives.details.get(name) or {}
        adjusted = detail.get("adjusted")
        level = drives.levels[name]
        views.append(
            DriveView(
                name=name,
                label=LABELS[name],
                level=level,
                computed=adjusted["computed"] if adjusted else level,
                adjusted=DriveAdjustment(**adjusted) if adjusted else None,
                context=describe(name, detail),
                in_prompt=level >= config.inject_at,
            )
        )
    history = [AdjustmentRecord(**change) for change in reversed(house.inner_life.adjustments())]
    return DrivesView(
        at=drives.at,
        drives=views,
        dominant=drives.dominant,
        dominant_level=drives.dominant_level,
        dominant_context=describe(drives.dominant, drives.details.get(drives.dominant) or {}),
        inject_at=config.inject_at,
        reach_out_at=config.reach_out_at,
        adjustment_half_life_hours=config.adjustment_half_life_hours,
        history=history,
    )


def set_drive(house: Managers, settings: Settings, name: str, change: DriveLevelIn, now: datetime) -> DrivesView:
    """The human sets a drive's level: recorded, in force at once, fading back to the computed level."""
    if name not in DRIVES:
        raise NotFoundError(f"no drive {name!r}; the drives are {', '.join(DRIVES)}", field="name")
    current = next(d for d in drives_view(house, settings, now).drives if d.name == name)
    try:
        house.inner_life.adjust(name, change.level, now, by="human", computed=current.computed)
    except UnknownDrive as exc:
        raise NotFoundError(str(exc), field="name") from exc
    return drives_view(house, settings, now)


# -- open questions ---------------------------------------------------------------------------------------------


def _question(q: OpenQuestionView) -> QuestionView:
    return QuestionView(
        id=q.id,
        topic=q.topic,
        context=q.context or "",
        priority=q.priority,
        source=q.source,
        status=q.status,
        resolution=q.resolution,
        created_at=as_utc(q.created_at),
        resolved_at=as_utc(q.resolved_at),
    )


def goal_metrics(house: Managers) -> GoalMetrics:
    """HMP's goal metrics (managers/goals.py)."""
    return house.goals.metrics()


def questions(house: Managers, limit: int = 200) -> QuestionList:
    rows = house.inner_life.questions(limit)
    ordered = sorted(rows, key=lambda q: (q.status != "open", -q.priority if q.status == "open" else 0, -q.id))
    return QuestionList(questions=[_question(q) for q in ordered], open=sum(q.status == "open" for q in rows))


def _find_question(house: Managers, question_id: int) -> OpenQuestionView:
    try:
        return house.inner_life.question(question_id)
    except NotFound as exc:
        raise NotFoundError(N_("no question %(question_id)s"), question_id=question_id, field="id") from exc


def resolve_question(house: Managers, question_id: int, answer: ResolutionIn, now: datetime) -> QuestionView:
    question = _find_question(house, question_id)
    if question.status != "open":
        raise ServiceError(f"question {question_id} is already {question.status}", field="id", status=409)
    if not answer.resolution.strip():
        raise ServiceError(N_("the resolution is empty"), field="resolution", status=422)
    return _question(house.inner_life.resolve_question(question_id, answer.resolution, now))


def delete_question(house: Managers, question_id: int) -> None:
    """A human's delete: the question is gone for good (the persona's own resolved ones go after a while)."""
    _find_question(house, question_id)
    house.inner_life.delete_question(question_id)


# -- plots over time --------------------------------------------------------------------------------------------


def valence(emotions: list[tuple[str, int]]) -> float | None:
    """The strength-weighted mean valence of the mapped emotions (None when none is mapped)."""
    mapped = [(VALENCE[name], strength) for name, strength in emotions if name in VALENCE]
    total = sum(strength for _, strength in mapped)
    return round(sum(v * strength for v, strength in mapped) / total, 3) if total else None


def _aligned(
    key: str,
    title: str,
    y_label: str,
    columns: Mapping[str, Mapping[float, float | None]],
    points_only: tuple[str, ...] = (),
) -> Chart:
    """Series with points at different times on one x axis (uPlot's shape): None where a series has no point."""
    xs = sorted({x for points in columns.values() for x in points})
    return Chart(
        key=key,
        title=title,
        y_label=y_label,
        x=xs,
        series=[
            Series(label=label, values=[points.get(x) for x in xs], points_only=label in points_only)
            for label, points in columns.items()
        ],
    )


def _seconds(value: datetime | None) -> float | None:
    value = as_utc(value)
    return round(value.timestamp(), 3) if value is not None else None


def charts(house: Managers, limit: int = 200) -> Charts:
    persona: dict[float, float | None] = {}
    for message in house.journal.thoughts(limit, THOUGHT_KINDS):
        point = valence(emotion_strengths([str(e) for e in message.emotions or []]))
        if point is not None and (x := _seconds(message.created_at)) is not None:
            persona[x] = point
    human = {
        x: VALENCE[e.emotion]
        for e in house.journal.human_emotions(limit)
        if e.emotion in VALENCE and (x := _seconds(e.created_at)) is not None
    }
    novelty: dict[float, float | None] = {}
    stagnant: dict[float, float | None] = {}
    for row in house.journal.stagnation(limit):
        if row.novelty_score is not None and (x := _seconds(row.created_at)) is not None:
            novelty[x] = round(row.novelty_score, 2)
            if row.stagnation_flag:
                stagnant[x] = round(row.novelty_score, 2)
    prompt: dict[float, float | None] = {}
    completion: dict[float, float | None] = {}
    for tick in house.journal.ticks(limit):
        if (x := _seconds(tick.started_at)) is not None:
            prompt[x], completion[x] = tick.prompt_tokens or 0, tick.completion_tokens or 0
    return Charts(
        emotions=_aligned("emotions", N_("Emotions (valence)"), "valence −1 … 1", {"persona": persona, "human": human}),
        novelty=_aligned(
            "novelty",
            N_("Novelty of each thought"),
            "novelty 0 … 100",
            {"novelty": novelty, "stagnant": stagnant},
            points_only=("stagnant",),
        ),
        tokens=_aligned("tokens", N_("Tokens per tick"), "tokens", {"prompt": prompt, "completion": completion}),
        valence=VALENCE,
    )


# -- the prompt's layers ----------------------------------------------------------------------------------------


def _layer(layer: dict[str, Any], budget: int | None) -> PromptLayer:
    tokens = int(layer.get("tokens") or 0)
    return PromptLayer(
        layer=str(layer.get("layer")),
        items=int(layer.get("items") or 0),
        tokens=tokens,
        system=bool(layer.get("system")),
        share=round(tokens / budget, 4) if budget else None,
    )


def prompt_layers(house: Managers) -> PromptLayers:
    """The last prompt's layers (as prepare_context reported them when the tick closed) and what it dropped."""
    for tick in reversed(house.journal.ticks(LAYERS_LOOKBACK)):
        context = (tick.summary or {}).get("context") or {}
        if not context.get("layers") and not context.get("budget_tokens"):
            continue
        budget = context.get("budget_tokens")
        layers = [_layer(layer, budget) for layer in context.get("layers") or []]
        return PromptLayers(
            thread=tick.thread_id,
            tick=tick.tick,
            at=as_utc(tick.started_at),
            window_tokens=context.get("window_tokens"),
            budget_tokens=budget,
            max_tokens=context.get("max_tokens"),
            used_tokens=sum(layer.tokens for layer in layers),
            layers=layers,
            dropped=[str(d) for d in context.get("dropped") or []],
        )
    return PromptLayers()
