"""What the persona did and is, as plain data: the reports `run.py inspect`, `sessions` and `approvals` print (and the
web app shows). One place builds them (read-only, over the unit's repositories); the command line and the web only
render."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from memory.note_kinds import NoteSource
from persona.drives import compute_drives

if TYPE_CHECKING:
    from managers import Managers
    from managers.consent import ApprovalView, AuditView, TaintView
    from managers.sessions import SessionView

VALIDATION_WINDOW = 100  # the outputs the validators' metrics are computed over


def iso(value: date | None) -> str | None:  # a datetime is a date
    return value.isoformat() if value is not None else None


def session_row(s: SessionView) -> dict[str, Any]:
    return {
        "id": s.id,
        "thread_id": s.thread_id,
        "playbook": s.playbook,
        "persona": s.persona,
        "status": s.status,
        "first_tick": s.first_tick,
        "last_tick": s.last_tick,
        "started_at": iso(s.started_at),
        "stopped_at": iso(s.stopped_at),
        "revived_from": s.revived_from,
        "goals": len((s.goal_state or {}).get("goals", [])),
        "open_tasks": len((s.goal_state or {}).get("tasks", [])),
    }


def approval_row(a: ApprovalView) -> dict[str, Any]:
    return {
        "id": a.id,
        "status": a.status,
        "type": a.type,
        "args": a.args,
        "effect": a.effect,
        "description": a.description,
        "reason": a.reason,
        "thread_id": a.thread_id,
        "tick": a.tick,
        "requested_at": iso(a.created_at),
        "decided_at": iso(a.decided_at),
        "decided_by": a.decided_by,
        "decision_reason": a.decision_reason,
        "executed_at": iso(a.executed_at),
        "result": a.result,
        "untrusted_sources": list(a.provenance or []),
    }


def taint_row(t: TaintView, text: str) -> dict[str, Any]:
    """A row written from untrusted text: which, what it says now, and where its words came from."""
    return {
        "id": t.id,
        "tier": t.tier,
        "ref": t.ref,
        "text": text,
        "thread_id": t.thread_id,
        "tick": t.tick,
        "at": iso(t.updated_at),
        "untrusted_sources": list(t.sources or []),
        "trusted_at": iso(t.cleared_at),
        "trusted_by": t.cleared_by,
    }


def audit_row(e: AuditView) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": iso(e.created_at),
        "thread_id": e.thread_id,
        "tick": e.tick,
        "type": e.type,
        "effect": e.effect,
        "decision": e.decision,
        "actor": e.actor,
        "reason": e.reason,
        "approval_id": e.approval_id,
    }


class ReportManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def inspect(
        self, now: datetime, limit: int, database_url: str, *, validation: Callable[..., dict[str, Any]]
    ) -> dict[str, Any]:
        """Ticks, threads, notes, responses with their reflex fields, anti-stagnation metrics, the validators' metrics
        (coverage, accuracy, response time, drift), commands, LLM use, memory, drives, dreams, goals, tasks, sessions,
        approvals and the audit log."""
        repos = self.repos
        settings = self.house.deps.settings
        return {
            "database": database_url,
            "ticks": {
                "count": repos.ticks.count(),
                "recent": [
                    {
                        "thread": t.thread_id,
                        "tick": t.tick,
                        "status": t.status,
                        "mode": t.mode,
                        "llm_calls": t.llm_calls,
                        "prompt_tokens": t.prompt_tokens,
                        "completion_tokens": t.completion_tokens,
                        "llm_ms": round(t.llm_ms, 1),
                        "started_at": iso(t.started_at),
                        "finished_at": iso(t.finished_at),
                        "summary": t.summary,
                    }
                    for t in repos.ticks.recent(limit)
                ],
            },
            "threads": [
                {
                    "id": t.id,
                    "parent_id": t.parent_id,
                    "label": t.label,
                    "status": t.status,
                    "tick": t.tick,
                    "depth": t.depth,
                    "window_ratio": t.window_ratio,
                    "origin": t.origin,
                    "playbook": t.playbook,
                    "messages": repos.messages.count(t.id),
                    "chronicle": t.chronicle,
                    "error": t.error,
                    "created_at": iso(t.created_at),
                    "completed_at": iso(t.completed_at),
                }
                for t in repos.threads.all()
            ],
            "notes": {
                "incoming": [
                    {
                        "id": n.id,
                        "source": n.source,
                        "text": n.text,
                        "priority": n.priority,
                        "read": n.read,
                        "created_at": iso(n.created_at),
                    }
                    for n in repos.notes.list(source="incoming", limit=limit)
                ],
                "outgoing": [
                    {"id": n.id, "text": n.text, "tags": n.tags, "created_at": iso(n.created_at)}
                    for n in repos.notes.list(source=NoteSource.PERSONA, limit=limit)
                ],
            },
            "responses": [
                {
                    "id": m.id,
                    "thread": m.thread_id,
                    "tick": m.tick,
                    "kind": m.kind,
                    "content": m.content,
                    "llm_id": m.llm_id,
                    "emotions": m.emotions,
                    "novelty_score": m.novelty_score,
                    "stagnation_flag": m.stagnation_flag,
                    "stagnation_reason": m.stagnation_reason,
                    "triggered_actions": m.triggered_actions,
                    "rating": m.rating,
                    "distribution": m.distribution,
                    "validators": m.validators,
                    "auto_pass": m.auto_pass,
                    "self_validation": m.self_validation,
                    "confidence": m.confidence,
                    "reflection": m.reflection,
                    "new_ideas": m.new_ideas,
                    "refined_ideas": m.refined_ideas,
                    "discarded_ideas": m.discarded_ideas,
                    "tags": m.tags,
                    "emotion_source": (m.meta or {}).get("emotion_source"),
                }
                for thread in repos.threads.all()
                for m in repos.messages.recent(
                    thread.id, limit, kinds=("response", "continuation", "stagnation_record")
                )
            ],
            "anti_stagnation": [
                {
                    "thread": r.thread_id,
                    "tick": r.tick,
                    "message_id": r.message_id,
                    "novelty_score": r.novelty_score,
                    "ngram_similarity": r.ngram_similarity,
                    "semantic_similarity": r.semantic_similarity,
                    "llm_novelty": r.llm_novelty,
                    "method": r.method,
                    "new_ideas": r.new_ideas,
                    "refined_ideas": r.refined_ideas,
                    "discarded_ideas": r.discarded_ideas,
                    "stagnation_flag": r.stagnation_flag,
                    "reason": r.reason,
                    "streak": r.streak,
                    "diagnosis": r.diagnosis,
                    "mechanisms": r.mechanisms,
                    "triggered_actions": r.triggered_actions,
                    "sampling": r.sampling,
                    "novelty_after": r.novelty_after,
                    "created_at": iso(r.created_at),
                }
                for r in repos.stagnation.recent(limit)
            ],
            "validation": validation(
                repos.messages.validations(VALIDATION_WINDOW), conflict_below=settings.reflexes.agreement_min
            ),
            "commands": [
                {"cmd_id": c.cmd_id, "tick": c.tick, "type": c.type, "status": c.status, "result": c.result}
                for c in repos.commands.recent(limit)
            ],
            "llm": {"totals": repos.llm_calls.totals(), "by_model": repos.llm_calls.by_model()},
            "spend": self.spend(now),
            "llm_memory": [
                {"id": m.id, "title": m.title, "content": m.content} for m in repos.llm_memory.recent(limit)
            ],
            "config": repos.config.all(),
            **self.autonomy(now, limit),
            **self.consent(limit),
        }

    def spend(self, now: datetime) -> dict[str, Any]:
        """Today's and this hour's spend per model, cached and new prompt tokens, the budget; the quiet ticks today."""
        spent = self.house.budget.spend(now)
        midnight = now.astimezone(self.house.deps.settings.zone()).replace(hour=0, minute=0, second=0, microsecond=0)
        spent["quiet_ticks_today"] = self.house.thinking.quiet_ticks(since=midnight)
        return spent

    def autonomy(self, now: datetime, limit: int) -> dict[str, Any]:
        """Drives, open questions, dreams, goals, tasks (with their sub-cycles) and sessions, for inspect."""
        repos = self.repos
        settings = self.house.deps.settings
        drives: dict[str, Any] = compute_drives(repos, now, settings.drives).as_dict()
        drives["zone"] = str(settings.zone())
        offers = []
        for offer in repos.config.reach_outs:
            sent = [
                c
                for c in repos.commands.recent(200, thread_id=offer.get("thread"))
                if c.tick == offer.get("tick") and c.type == "messages.send" and c.status == "executed"
            ]
            offers.append({**offer, "sent": bool(sent)})
        drives["reach_outs"] = offers[-limit:]
        drives["user_emotions"] = [
            {"emotion": e.emotion, "strength": e.strength, "snippet": e.snippet, "at": iso(e.created_at)}
            for e in repos.emotion_log.recent("user", limit)
        ]
        return {
            "drives": drives,
            "open_questions": [
                {
                    "id": q.id,
                    "topic": q.topic,
                    "context": q.context,
                    "priority": q.priority,
                    "source": q.source,
                    "status": q.status,
                    "resolution": q.resolution,
                    "created_at": iso(q.created_at),
                    "resolved_at": iso(q.resolved_at),
                }
                for q in repos.questions.list(limit * 3)
            ],
            "dreams": [
                {
                    "id": i.id,
                    "level": i.level,
                    "insight": i.insight,
                    "strategy": i.strategy,
                    "log_entry": i.log_entry,
                    "trigger_topic": i.trigger_topic,
                    "created_at": iso(i.created_at),
                }
                for i in repos.insights.recent(limit)
            ],
            "goals": [
                {
                    "id": g.id,
                    "title": g.title,
                    "horizon": g.horizon,
                    "status": g.status,
                    "priority": g.priority,
                    "progress_notes": g.progress_notes,
                    "reason": g.reason,
                    **repos.goals.progress(g.id),
                }
                for g in repos.goals.list(limit=limit * 5)
            ],
            "tasks": [
                {
                    "id": t.id,
                    "title": t.title,
                    "status": t.status,
                    "priority": t.priority,
                    "pinned": t.pinned,
                    "goal_id": t.goal_id,
                    "repl_mode": t.repl_mode,
                    "repl_status": t.repl_status,
                    "repl_thread": t.repl_thread,
                    "repl_config": t.repl_config,
                    "repl_error": t.repl_error,
                }
                for t in repos.tasks.list(limit=limit * 5)
            ],
            "task_notes": [
                {"id": n.id, "task_id": n.task_id, "text": n.text, "read": n.read, "created_at": iso(n.created_at)}
                for n in repos.notes.list(source=NoteSource.TASK, limit=limit)
            ],
            "sessions": [session_row(s) for s in self.house.sessions.listing(limit)],
            "idle": {
                t.id: idle.model_dump(mode="json")
                for t in repos.threads.all()
                if (idle := self.house.loop.cycle(t.id).idle) is not None
            },
        }

    def consent(self, limit: int) -> dict[str, Any]:
        """The approvals waiting for the human, the latest decided, and the audit log of every consent decision."""
        consent = self.house.consent
        return {
            "approvals": {
                "pending": [approval_row(a) for a in consent.pending()],
                "recent": [approval_row(a) for a in consent.listing(None, limit)],
            },
            "audit": [audit_row(e) for e in consent.audit_log(limit * 3)],
        }
