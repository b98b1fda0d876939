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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langgraph.runtime import Runtime

import i18n
from llm import AllLLMsUnavailable, Sampling
from memory import Repos
from memory.note_kinds import HUMAN_SOURCES
from nodes.context import UNREAD, AnimaContext, Services, services_of
from nodes.state import DrivesReport, DrivesUpdate, ReachOut, TickState
from persona.drives import (
    RESOLUTION_SCHEMA,
    classify_user_emotion,
    compute_drives,
    parse_resolutions,
    reach_out_offer,
    touched_questions,
)
from persona.prompts import RESOLUTION_PROMPT, USER_EMOTION_PROMPT
from persona.settings import DriveSettings

log = logging.getLogger(__name__)
MAX_NOTES_PER_TICK = 5
USER_EMOTION_HORIZON = 4  # devotion half-lives: an older note's emotion would count for less than 1/16
CONVERSATION_HORIZON = timedelta(days=1)  # a conversation older than this settles no open question now
MAX_OFFERS_KEPT = 20


def update_drives(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> DrivesUpdate:
    services = services_of(runtime)
    thread_id, tick = state.thread_id, state.tick
    settings = services.settings.drives
    with services.db.unit() as repos:
        thread = _thread(services, repos, state, thread_id)
        if thread is not None and thread.origin in ("task", "playbook"):
            return {"drives": {}}
        root = _thread(services, repos, state, state.root_thread or thread_id)
        started = root.created_at if root is not None else None
        repos.config.preload_drives()
        notes = _notes_to_feel(services, settings, repos)
        conversation = _conversation_to_judge(services, repos, thread_id)
        # a human waits for an answer: no model is asked now (the lexicon still reads their notes; what it cannot
        # read, and the open questions, are asked about at a later tick)
        held = (bool(notes) or conversation is not None) and _someone_waits(services, repos, state)
        if held:
            conversation = None
        if not notes and conversation is None:  # the usual tick: nothing to ask the model, one transaction
            return {"drives": _take_stock(services, repos, state, started, resolved=[])}
    # a model may be asked: outside any transaction
    generate = _later if held else _generator(services, state)
    felt = _feel(settings, generate, notes, services.settings.prompt_language)
    verdict = _judge(services, generate, conversation) if conversation is not None else None
    with services.db.unit() as repos:
        repos.config.preload_drives()
        if felt:
            for _note_id, text, created_at, emotion in felt:
                if emotion and emotion[0] != "neutral":
                    repos.emotion_log.add(
                        emotion[0],
                        emotion[1],
                        subject="user",
                        snippet=text,
                        thread_id=thread_id,
                        tick=tick,
                        created_at=created_at,
                    )
            repos.config.emotion_note_pointer = felt[-1][0]
        resolved = (
            _settle(services, repos, thread_id, conversation, verdict)
            if verdict is not None and conversation is not None
            else []
        )
        return {"drives": _take_stock(services, repos, state, started, resolved=resolved)}


def _thread(services, repos, state: TickState, thread_id: str):
    """The thread's row as the tick's first step read it."""
    return services.reads.get(state.thread_id, state.tick, ("thread", thread_id), lambda: repos.threads.get(thread_id))


def _take_stock(
    services: Services, repos: Repos, state: TickState, started: datetime | None, resolved: list[int]
) -> DrivesReport:
    """The drives now, the resolved questions purged, and the reach-out offer if the one rule allows it."""
    settings = services.settings.drives
    thread_id, tick = state.thread_id, state.tick
    now = services.clock()
    purged = repos.questions.purge_resolved(now - timedelta(days=settings.resolved_keep_days))
    drives = compute_drives(repos, now, settings, since=started)
    offers = repos.config.reach_outs
    last_offer = datetime.fromisoformat(offers[-1]["at"]) if offers else None
    limit = services.settings.cycle.notes_limit  # read as prepare_context reads them (unless its cycle filters them)
    waiting = bool(
        services.reads.get(thread_id, tick, (UNREAD, limit, None), lambda: repos.notes.unread_incoming(limit=limit))
    )
    why_not = reach_out_offer(
        drives,
        now,
        services.settings.zone(),
        settings,
        quiet_hours=services.settings.dreaming.quiet_hours,
        human_waiting=waiting,
        last_offer_at=last_offer,
    )  # one quiet-hours setting for both
    offer: ReachOut | None = None
    if why_not is None:
        offer = {
            "at": now.isoformat(),
            "tick": tick,
            "thread": thread_id,
            "drive": drives.dominant,
            "level": drives.dominant_level,
        }
        if not offers or offers[-1].get("tick") != tick or offers[-1].get("thread") != thread_id:  # a re-run
            repos.config.reach_outs = (offers + [offer])[-MAX_OFFERS_KEPT:]
        repos.processes.add(
            "drives.reach_out",
            f"{drives.dominant} {drives.dominant_level:.2f}: the persona may write to its human unprompted",
            status="close",
            thread_id=thread_id,
        )
    return {
        "levels": drives.levels,
        "dominant": drives.dominant,
        "level": drives.dominant_level,
        "details": drives.details,
        "at": drives.at,
        "inject_at": settings.inject_at,
        "reach_out": offer,
        "reach_out_blocked": why_not,
        "resolved_questions": resolved,
        "purged_questions": purged,
    }


def _generator(services, state: TickState):
    def generate(prompt: str, schema: dict[str, Any]) -> str:
        return services.llms.generate(
            "drives",
            prompt=prompt,
            json_schema=schema,
            sampling=Sampling(temperature=0.2, max_tokens=160),
            tags={"thread_id": state.thread_id, "tick": state.tick},
        ).text

    return generate


def _someone_waits(services: Services, repos: Repos, state: TickState) -> bool:
    """A human's note is unread — from the unread notes as prepare_context reads them (one read for both)."""
    limit = services.settings.cycle.notes_limit
    unread = services.reads.get(
        state.thread_id, state.tick, (UNREAD, limit, None), lambda: repos.notes.unread_incoming(limit=limit)
    )
    return any(n.source in HUMAN_SOURCES for n in unread)


def _later(prompt: str, schema: dict[str, Any]) -> str:
    """The generator while a human waits: no side call now (`_feel` leaves the rest for a later tick)."""
    raise AllLLMsUnavailable("not asked while a human's note waits")


def _notes_to_feel(services, settings: DriveSettings, repos) -> list[tuple[int, str, Any]]:
    """The human's new notes, whose emotion goes to the log. Notes older than four devotion half-lives would move
    no drive any more: they are passed over (a backlog of old notes costs nothing)."""
    since = services.clock() - timedelta(hours=USER_EMOTION_HORIZON * settings.devotion_half_life_hours)
    pointer = repos.config.emotion_note_pointer
    return [
        (n.id, n.text, n.created_at)
        for n in repos.notes.human_after_lines(pointer, since=since, limit=MAX_NOTES_PER_TICK)
    ]


def _feel(
    settings: DriveSettings, generate, notes: list[tuple[int, str, Any]], language: str = "en"
) -> list[tuple[int, str, Any, Any]]:
    """Each note's emotion (lexicon first, the model only when it says nothing); a missing model leaves the rest for
    the next tick."""
    found: list[tuple[int, str, Any, tuple[str, int, str] | None]] = []
    for note_id, text, created_at in notes:
        try:
            emotion = classify_user_emotion(
                text, generate if settings.user_emotion_llm else None, i18n.text(USER_EMOTION_PROMPT, language)
            )
        except AllLLMsUnavailable as exc:  # the rest waits for the next tick
            log.warning("user emotion not classified yet: %s", exc)
            break
        found.append((note_id, text, created_at, emotion))
    return found


@dataclass
class Conversation:
    """A conversation (human notes the persona has read and answered) to settle open questions with."""

    prompt: str
    open_ids: set[int]
    last_note_id: int


def _conversation_to_judge(services, repos, thread_id: str) -> Conversation | None:
    """After a conversation, the open questions it may have answered; None when there is nothing to ask (the
    notes are then marked as looked at when no question is open)."""
    pointer = repos.config.resolution_note_pointer
    notes = repos.notes.human_after_lines(pointer, read=True, since=services.clock() - CONVERSATION_HORIZON, limit=10)
    if not notes:
        return None
    questions = repos.questions.open_lines(limit=10)
    replies = (
        [m.content for m in repos.messages.recent_lines(thread_id, 2, columns=("content",))]  # the notes were
        if questions
        else []
    )  # read (answered) last tick
    user = services.settings.user_name
    conversation = "\n".join(
        [f"{user}: {n.text}" for n in notes] + [f"{services.persona.display_name}: {r[-600:]}" for r in replies]
    )
    questions = touched_questions(conversation, questions)
    if not questions:  # no question open, or none the conversation touches: nothing to ask
        repos.config.resolution_note_pointer = notes[-1].id
        return None
    listing = "\n".join(f"- id {q.id}: {q.topic}" + (f" ({q.context})" if q.context else "") for q in questions)
    prompt = i18n.text(RESOLUTION_PROMPT, services.settings.prompt_language).format(
        name=services.persona.display_name, questions=listing, conversation=conversation
    )
    return Conversation(prompt, {q.id for q in questions}, notes[-1].id)


def _judge(services, generate, conversation: Conversation) -> list[tuple[int, str]] | None:
    """Which open questions the conversation settled (None: no model answered; asked again next tick)."""
    try:
        raw = generate(conversation.prompt, RESOLUTION_SCHEMA)
    except AllLLMsUnavailable as exc:
        log.warning("open questions not checked yet: %s", exc)
        return None
    return parse_resolutions(raw, conversation.open_ids)


def _settle(services, repos, thread_id: str, conversation: Conversation, verdict: list[tuple[int, str]]) -> list[int]:
    for qid, answer in verdict:
        repos.questions.resolve(qid, answer, services.clock())
    if verdict:
        repos.processes.add(
            "drives.questions",
            "resolved in conversation: " + "; ".join(f"{qid}: {answer[:80]}" for qid, answer in verdict),
            status="close",
            thread_id=thread_id,
        )
    repos.config.resolution_note_pointer = conversation.last_note_id
    return [qid for qid, _ in verdict]
