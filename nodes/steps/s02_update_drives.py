"""Step 2 (Nexus Ark internal state): before the prompt is built, the persona takes stock of itself.

- The user's new notes get an emotion in the emotion log (lexicon first, the model only when it says nothing);
- after a conversation, the model judges which open questions it answered — only those that share a content word
  with it (`touched_questions`; a conversation that touches none costs no call); resolved ones go after 7 days;
- the four drives are computed (persona/drives.py) and, by the one reach-out rule, an offer to write to the
  human unprompted may be made. prepare_context shows the drives ≥ 0.4 and the offer.

Task cycles and playbook children have no inner life of their own: the step passes them by.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from langgraph.runtime import Runtime

import i18n
from llm import AllLLMsUnavailable, Sampling
from managers import Managers
from managers.inner_life import Felt
from memory.models import Thread
from memory.note_kinds import HUMAN_SOURCES
from nodes.context import UNREAD, AnimaContext, Services, services_of
from nodes.state import DrivesReport, DrivesUpdate, ReachOut, TickState
from persona.drives import RESOLUTION_SCHEMA, classify_user_emotion, parse_resolutions
from persona.prompts import RESOLUTION_PROMPT, USER_EMOTION_PROMPT
from persona.settings import DriveSettings

log = logging.getLogger(__name__)
MAX_NOTES_PER_TICK = 5
USER_EMOTION_HORIZON = 4  # devotion half-lives: an older note's emotion would count for less than 1/16
CONVERSATION_HORIZON = timedelta(days=1)  # a conversation older than this settles no open question now
Generate = Callable[[str, dict[str, Any]], str]  # a prompt and a JSON schema -> the model's answer


def update_drives(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> DrivesUpdate:
    services = services_of(runtime)
    thread_id, tick = state.thread_id, state.tick
    settings = services.settings.drives
    with services.managers.unit() as house:
        thread = _thread(services, house, state, thread_id)
        if thread is not None and thread.origin in ("task", "playbook"):
            return {"drives": {}}
        root = _thread(services, house, state, state.root_thread or thread_id)
        started = root.created_at if root is not None else None
        house.inner_life.preload_tick()
        notes = _notes_to_feel(services, settings, house)
        conversation = _conversation_to_judge(services, house, thread_id)
        # a human waits for an answer: no model is asked now (the lexicon still reads their notes; what it cannot
        # read, and the open questions, are asked about at a later tick)
        held = (bool(notes) or conversation is not None) and _someone_waits(services, house, state)
        if held:
            conversation = None
        if not notes and conversation is None:  # the usual tick: nothing to ask the model, one transaction
            return {"drives": _take_stock(services, house, state, started, resolved=[])}
    # a model may be asked: outside any transaction
    generate = _later if held else _generator(services, state)
    felt = _feel(settings, generate, notes, services.settings.prompt_language)
    verdict = _judge(services, generate, conversation) if conversation is not None else None
    with services.managers.unit() as house:
        house.inner_life.preload_tick()
        house.inner_life.felt(felt, thread_id=thread_id, tick=tick)
        resolved = (
            house.inner_life.settle(
                verdict, last_note_id=conversation.last_note_id, thread_id=thread_id, now=services.clock()
            )
            if verdict is not None and conversation is not None
            else []
        )
        return {"drives": _take_stock(services, house, state, started, resolved=resolved)}


def _thread(services: Services, house: Managers, state: TickState, thread_id: str) -> Thread | None:
    """The thread's row as the tick's first step read it."""
    thread: Thread | None = services.reads.get(
        state.thread_id, state.tick, ("thread", thread_id), lambda: house.threads.get(thread_id)
    )
    return thread


def _unread(services: Services, house: Managers, state: TickState) -> list[Any]:
    """The unread notes as prepare_context reads them (unless its cycle filters them): one read for both."""
    limit = services.settings.cycle.notes_limit
    unread: list[Any] = services.reads.get(
        state.thread_id, state.tick, (UNREAD, limit, None), lambda: house.notes.unread(limit)
    )
    return unread


def _take_stock(
    services: Services, house: Managers, state: TickState, started: datetime | None, resolved: list[int]
) -> DrivesReport:
    """The drives now, the resolved questions purged, and the reach-out offer if the one rule allows it."""
    settings = services.settings.drives
    stock = house.inner_life.take_stock(
        services.clock(),
        started=started,
        thread_id=state.thread_id,
        tick=state.tick,
        human_waiting=lambda: bool(_unread(services, house, state)),
    )
    drives = stock.drives
    return {
        "levels": drives.levels,
        "dominant": drives.dominant,
        "level": drives.dominant_level,
        "details": drives.details,
        "at": drives.at,
        "inject_at": settings.inject_at,
        "reach_out": cast(ReachOut | None, stock.offer),
        "reach_out_blocked": stock.why_not,
        "resolved_questions": resolved,
        "purged_questions": stock.purged,
    }


def _generator(services: Services, state: TickState) -> Generate:
    def generate(prompt: str, schema: dict[str, Any]) -> str:
        return services.llms.generate(
            "drives",
            prompt=prompt,
            json_schema=schema,
            sampling=Sampling(temperature=0.2, max_tokens=160),
            tags={"thread_id": state.thread_id, "tick": state.tick},
        ).text

    return generate


def _someone_waits(services: Services, house: Managers, state: TickState) -> bool:
    """A human's note is unread — from the unread notes as prepare_context reads them (one read for both)."""
    return any(n.source in HUMAN_SOURCES for n in _unread(services, house, state))


def _later(prompt: str, schema: dict[str, Any]) -> str:
    """The generator while a human waits: no side call now (`_feel` leaves the rest for a later tick)."""
    raise AllLLMsUnavailable("not asked while a human's note waits")


def _notes_to_feel(services: Services, settings: DriveSettings, house: Managers) -> list[tuple[int, str, datetime]]:
    """The human's new notes, whose emotion goes to the log. Notes older than four devotion half-lives would move
    no drive any more: they are passed over (a backlog of old notes costs nothing)."""
    since = services.clock() - timedelta(hours=USER_EMOTION_HORIZON * settings.devotion_half_life_hours)
    return house.inner_life.notes_to_feel(since, MAX_NOTES_PER_TICK)


def _feel(
    settings: DriveSettings, generate: Generate, notes: list[tuple[int, str, datetime]], language: str = "en"
) -> list[Felt]:
    """Each note's emotion (lexicon first, the model only when it says nothing); a missing model leaves the rest for
    the next tick."""
    found: list[Felt] = []
    for note_id, text, created_at in notes:
        try:
            emotion = classify_user_emotion(
                text, generate if settings.user_emotion_llm else None, i18n.text(USER_EMOTION_PROMPT, language)
            )
        except AllLLMsUnavailable as exc:  # the rest waits for the next tick
            log.warning("user emotion not classified yet: %s", exc)
            break
        found.append(Felt(note_id, text, created_at, emotion))
    return found


@dataclass
class Conversation:
    """A conversation (human notes the persona has read and answered) to settle open questions with."""

    prompt: str
    open_ids: set[int]
    last_note_id: int


def _conversation_to_judge(services: Services, house: Managers, thread_id: str) -> Conversation | None:
    """After a conversation, the open questions it may have answered; None when there is nothing to ask (the
    notes are then marked as looked at when no question is open)."""
    name = services.persona.display_name
    found = house.inner_life.to_settle(
        thread_id, since=services.clock() - CONVERSATION_HORIZON, user=services.settings.user_name, name=name
    )
    if found is None:
        return None
    listing = "\n".join(f"- id {q.id}: {q.topic}" + (f" ({q.context})" if q.context else "") for q in found.questions)
    prompt = i18n.text(RESOLUTION_PROMPT, services.settings.prompt_language).format(
        name=name, questions=listing, conversation=found.conversation
    )
    return Conversation(prompt, {q.id for q in found.questions}, found.last_note_id)


def _judge(services: Services, generate: Generate, conversation: Conversation) -> list[tuple[int, str]] | None:
    """Which open questions the conversation settled (None: no model answered; asked again next tick)."""
    try:
        raw = generate(conversation.prompt, RESOLUTION_SCHEMA)
    except AllLLMsUnavailable as exc:
        log.warning("open questions not checked yet: %s", exc)
        return None
    return parse_resolutions(raw, conversation.open_ids)
