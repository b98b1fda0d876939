"""Step 1b (Nexus Ark internal state): before the prompt is built, the persona takes stock of itself.

- The user's new notes get an emotion in the emotion log (lexicon first, the model only when it says nothing);
- after a conversation, the model judges which open questions it answered; resolved ones go after 7 days;
- the four drives are computed (persona/drives.py) and, by the one reach-out rule, an offer to write to the
  human unprompted may be made. prepare_context shows the drives ≥ 0.4 and the offer.

Task cycles and playbook children have no inner life of their own: the step passes them by.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Sampling
from persona.drives import (
    REACH_OUT_KEY,
    RESOLUTION_SCHEMA,
    classify_user_emotion,
    compute_drives,
    parse_resolutions,
    reach_out_offer,
)
from persona.prompts import RESOLUTION_PROMPT, USER_EMOTION_PROMPT
from persona.settings import DriveSettings
from nodes.context import AnimaContext, services_of
from nodes.state import TickState

log = logging.getLogger(__name__)
EMOTION_POINTER = "drives/emotion_note_id"  # the last human note whose emotion was logged
RESOLUTION_POINTER = "drives/resolution_note_id"  # the last human note whose conversation was checked
MAX_NOTES_PER_TICK = 5
USER_EMOTION_HORIZON = 4  # devotion half-lives: an older note's emotion would count for less than 1/16
CONVERSATION_HORIZON = timedelta(days=1)  # a conversation older than this settles no open question now
MAX_OFFERS_KEPT = 20


def update_drives(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    thread_id, tick = state.thread_id, state.tick
    settings = svc.settings.drives
    quiet_hours = svc.settings.dreaming.quiet_hours  # one setting for both
    zone = svc.settings.zone()
    with svc.db.unit() as repos:
        thread = repos.threads.get(thread_id)
        if thread is not None and thread.origin in ("task", "playbook"):
            return {"drives": {}}
        root = repos.threads.get(state.root_thread or thread_id)
        started = root.created_at if root is not None else None
    generate = _generator(svc, state)
    _log_user_emotions(svc, settings, generate, thread_id, tick)
    resolved = _judge_resolutions(svc, generate, thread_id)
    now = svc.clock()
    with svc.db.unit() as repos:
        purged = repos.questions.purge_resolved(now - timedelta(days=settings.resolved_keep_days))
        drives = compute_drives(repos, now, settings, since=started)
        offers = list(repos.config.get(REACH_OUT_KEY) or [])
        last_offer = datetime.fromisoformat(offers[-1]["at"]) if offers else None
        waiting = bool(repos.notes.unread_incoming(limit=1))
        why_not = reach_out_offer(drives, now, zone, settings, quiet_hours=quiet_hours, human_waiting=waiting,
                                  last_offer_at=last_offer)
        offer = None
        if why_not is None:
            offer = {"at": now.isoformat(), "tick": tick, "thread": thread_id, "drive": drives.dominant,
                     "level": drives.dominant_level}
            if not offers or offers[-1].get("tick") != tick or offers[-1].get("thread") != thread_id:  # a re-run
                repos.config.set(REACH_OUT_KEY, (offers + [offer])[-MAX_OFFERS_KEPT:])
            repos.processes.add("drives.reach_out", f"{drives.dominant} {drives.dominant_level:.2f}: the persona may "
                                f"write to its human unprompted", status="close", thread_id=thread_id)
    report = {**drives.as_dict(), "inject_at": settings.inject_at, "reach_out": offer, "reach_out_blocked": why_not,
              "resolved_questions": resolved, "purged_questions": purged}
    return {"drives": report}


def _generator(svc, state: TickState):
    def generate(prompt: str, schema: dict[str, Any]) -> str:
        return svc.llms.generate("drives", prompt=prompt, json_schema=schema,
                                 sampling=Sampling(temperature=0.2, max_tokens=160),
                                 tags={"thread_id": state.thread_id, "tick": state.tick}).text
    return generate


def _log_user_emotions(svc, settings: DriveSettings, generate, thread_id: str, tick: int) -> None:
    """The human's new notes get an emotion in the log. Notes older than four devotion half-lives would move no
    drive any more: they are passed over (a backlog of old notes costs nothing)."""
    since = svc.clock() - timedelta(hours=USER_EMOTION_HORIZON * settings.devotion_half_life_hours)
    with svc.db.unit() as repos:
        pointer = int(repos.config.get(EMOTION_POINTER) or 0)
        notes = [(n.id, n.text, n.created_at)
                 for n in repos.notes.human_after(pointer, since=since, limit=MAX_NOTES_PER_TICK)]
    found: list[tuple[int, str, Any, tuple[str, int] | None]] = []
    for note_id, text, created_at in notes:
        try:
            emotion = classify_user_emotion(text, generate if settings.user_emotion_llm else None, USER_EMOTION_PROMPT)
        except AllLLMsUnavailable as exc:  # the rest waits for the next tick
            log.warning("user emotion not classified yet: %s", exc)
            break
        found.append((note_id, text, created_at, emotion))
    if not found:
        return
    with svc.db.unit() as repos:
        for note_id, text, created_at, emotion in found:
            if emotion and emotion[0] != "neutral":
                repos.emotion_log.add(emotion[0], emotion[1], subject="user", snippet=text, thread_id=thread_id,
                                      tick=tick, created_at=created_at)
        repos.config.set(EMOTION_POINTER, found[-1][0])


def _judge_resolutions(svc, generate, thread_id: str) -> list[int]:
    """After a conversation (human notes the persona has read and answered), ask which open questions it settled."""
    with svc.db.unit() as repos:
        pointer = int(repos.config.get(RESOLUTION_POINTER) or 0)
        notes = repos.notes.human_after(pointer, read=True, since=svc.clock() - CONVERSATION_HORIZON, limit=10)
        if not notes:
            return []
        questions = repos.questions.open(limit=10)
        last_id = notes[-1].id
        if not questions:
            repos.config.set(RESOLUTION_POINTER, last_id)
            return []
        replies = [m.content for m in repos.messages.recent(thread_id, 2)]  # the notes were read (answered) last tick
        user = svc.settings.user_name
        conversation = "\n".join([f"{user}: {n.text}" for n in notes] +
                                 [f"{svc.persona.display_name}: {r[-600:]}" for r in replies])
        listing = "\n".join(f"- id {q.id}: {q.topic}" + (f" ({q.context})" if q.context else "") for q in questions)
        open_ids = {q.id for q in questions}
    try:
        raw = generate(RESOLUTION_PROMPT.format(name=svc.persona.display_name, questions=listing,
                                                conversation=conversation), RESOLUTION_SCHEMA)
    except AllLLMsUnavailable as exc:
        log.warning("open questions not checked yet: %s", exc)
        return []
    verdict = parse_resolutions(raw, open_ids)
    with svc.db.unit() as repos:
        for qid, answer in verdict:
            repos.questions.resolve(qid, answer, svc.clock())
        if verdict:
            repos.processes.add("drives.questions", "resolved in conversation: " + "; ".join(
                f"{qid}: {answer[:80]}" for qid, answer in verdict), status="close", thread_id=thread_id)
        repos.config.set(RESOLUTION_POINTER, last_id)
    return [qid for qid, _ in verdict]
