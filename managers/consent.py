"""Consent and approvals: a command that waits for the human (an `approvals` row), the audit log of every decision,
and the human's answer.

The tick's gate (nodes/commands/consent.py `decide`) says whether a command runs, waits or is refused; what it
decides is recorded here (`request`, `record`). The human answers from any door — `run.py approve/deny`, the web
app, the MCP server — through `answer`: approved, the command runs once at the persona's next tick; denied, it never
runs and the persona reads the denial, with its reason, in its next prompt. An idle loop wakes on the answer. A
document sent over a channel (`kb.add_document`, no command of the persona's) is settled at once: added to the
knowledge base, or its kept bytes deleted.

Rows written from untrusted text (memory/taint.py) are listed here with where their words came from (`tainted`), and
the owner may trust one (`trust`): from then on it is shown as the persona's own and taints no prompt — an audited
human act, like an approval, from the page, the API or `run.py trust`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.models import Approval, AuditEntry, Taint
from memory.repositories.consent import canonical_args

if TYPE_CHECKING:
    from managers import Managers
    from memory import Database


DOCUMENT_APPROVAL = "kb.add_document"  # a text document someone other than the owner sent over a channel
TRUST = "provenance.trust"  # the audit log's name for the owner trusting a row written from untrusted text


class ApprovalError(ValueError):
    """No such approval, or it is no longer pending."""


class ConsentManager:
    """Approvals and the audit log, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- what the gate decided -------------------------------------------------------------------------------------

    def request(self, *, cmd_key: str, cmd_id: str, type: str, args: dict[str, Any], effect: str, description: str,
                reason: str, thread_id: str, root_thread: str, tick: int, now: datetime,
                provenance: Sequence[Any] = ()) -> tuple[Approval, bool]:
        """The pending approval for a command (an identical pending request is reused); (row, newly created). A new
        one is audited and told in the process log."""
        repos = self.repos
        row, created = repos.approvals.request(
            cmd_key=cmd_key, cmd_id=cmd_id, type=type, args=args, effect=effect, description=description,
            reason=reason, thread_id=thread_id, root_thread=root_thread, tick=tick, created_at=now,
            provenance=list(provenance))
        if created:
            repos.audit.add(thread_id=thread_id, tick=tick, cmd_key=cmd_key, type=type, effect=effect,
                            decision="requested", actor="loop", reason=reason, approval_id=row.id, created_at=now)
            repos.processes.add("approval.requested", f"{type} waits for my human's approval (approval {row.id}): "
                                f"{reason}", status="close", thread_id=thread_id)
            self._tell_owner(row, now)
        return row, created

    def _tell_owner(self, row: Approval, now: datetime) -> None:
        """The owner hears of a new approval once, on their channel (the Approvals page's badge says it too)."""
        from managers import notices

        owner = self.house.people.owner()
        settings = self.house.deps.settings
        language = owner.language or (settings.prompt_language if settings is not None else None)
        text = notices.say(notices.APPROVAL, language, command=row.type, id=row.id, reason=(row.reason or "")[:300])
        self.house.conversation.notify_owner(f"approval:{row.id}", text, now=now)

    def record(self, *, thread_id: str, tick: int, cmd_key: str, type: str, effect: str, decision: str, actor: str,
               reason: str, now: datetime, ethics: dict[str, Any] | None = None) -> AuditEntry:
        """One decision in the audit log (`ethics`: the ethics model an ethics decision was taken under)."""
        return self.repos.audit.add(thread_id=thread_id, tick=tick, cmd_key=cmd_key, type=type, effect=effect,
                                    decision=decision, actor=actor, reason=reason, created_at=now, ethics=ethics)

    # -- the human's side ----------------------------------------------------------------------------------------

    def answer(self, approval_id: int, *, approve: bool, by: str, reason: str = "", now: datetime,
               by_person: int | None = None) -> Approval:
        """Approve or deny a pending approval; a denial reaches the persona's next prompt with its reason.
        ApprovalError when there is no such approval or it was decided already, or when `by_person` (someone
        answering over a channel) is not an owner — only an owner answers approvals (None: the operator's own
        door, the web page or the terminal)."""
        repos = self.repos
        if by_person is not None and not self.house.people.is_owner(by_person):
            raise ApprovalError("only an owner answers approvals")
        row = repos.approvals.get(approval_id)
        if row is None:
            raise ApprovalError(f"no approval {approval_id}")
        try:
            repos.approvals.decide(approval_id, "approved" if approve else "denied", by, reason, now)
        except ValueError as exc:
            raise ApprovalError(str(exc)) from None
        repos.audit.add(thread_id=row.thread_id, tick=row.tick, cmd_key=row.cmd_key, type=row.type, effect=row.effect,
                        decision="approved" if approve else "denied", actor="human",
                        reason=f"{by}: {reason}" if reason else by,
                        approval_id=row.id, created_at=now)
        if row.type == DOCUMENT_APPROVAL:
            self._settle_document(row, approve=approve, reason=reason, now=now)
            return row
        if not approve:
            because = f": {reason}" if reason else " (no reason given)"
            repos.processes.add("approval.denied", f"my human denied {row.type} {canonical_args(row.args)[:200]} "
                                f"(approval {row.id}){because}", status="error", thread_id=row.thread_id)
            repos.commands.set_status(row.cmd_key, "denied", f"denied by my human{because}")
        return row

    def _settle_document(self, row: Approval, *, approve: bool, reason: str, now: datetime) -> None:
        """A document someone sent over a channel (managers/channels.py), settled at once — it is no command of the
        persona's, nothing waits for a tick: approved, it joins the knowledge base with its sender as its source
        (its chunks are data like every knowledge-base text: fenced in the prompt, an untrusted source for the
        consent gate); refused, its kept bytes are deleted and the note keeps the reference. The persona reads
        either in its process log."""
        repos, args = self.repos, dict(row.args or {})
        name, source, path = str(args.get("document", "document")), str(args.get("from", "")), Path(str(args.get("path")))
        if not approve:
            self.house.memory.drop_kept_document(path)
            because = f": {reason}" if reason else ""
            repos.processes.add("document.refused", f"my owner kept {name} from {source} out of my knowledge base "
                                f"(approval {row.id}){because}; it stays a reference", status="close",
                                thread_id=row.thread_id)
            return
        author = source.split(" (", 1)[0]
        try:
            if not path.is_file():
                raise FileNotFoundError(f"{name} is no longer kept under the data dir")
            upload = self.house.memory.add_kept_document(path, source=source, author=author, filename=name)
        except (OSError, ValueError) as exc:
            message = f"{name} could not be added: {exc}"
            repos.approvals.mark_failed(row.id, message[:2000], now)
            repos.audit.add(thread_id=row.thread_id, tick=row.tick, cmd_key=row.cmd_key, type=row.type,
                            effect=row.effect, decision="failed", actor="loop", reason=message[:2000],
                            approval_id=row.id, created_at=now)
            repos.processes.add("document.failed", message[:2000], status="error", thread_id=row.thread_id)
            return
        result = (upload.skipped or f"{name} from {source} added to my knowledge base (doc {upload.doc_id}, "
                  f"{upload.chunks} chunks)")
        repos.approvals.mark_executed(row.id, result, now)
        repos.audit.add(thread_id=row.thread_id, tick=row.tick, cmd_key=row.cmd_key, type=row.type, effect=row.effect,
                        decision="executed", actor="human", reason=f"approval {row.id}", approval_id=row.id,
                        created_at=now)
        repos.processes.add("document.added", f"my owner approved: {result} (approval {row.id})", status="ok",
                            thread_id=row.thread_id)

    # -- rows written from untrusted text ----------------------------------------------------------------------------

    def tainted(self, limit: int = 50) -> list[tuple[Taint, str]]:
        """The rows written from untrusted text that still taint every prompt that shows them, newest first, each
        with what it says now."""
        taints = self.repos.taints
        return [(row, taints.row_text(row.tier, row.ref)) for row in taints.active(limit)]

    def tainted_count(self) -> int:
        return self.repos.taints.count_active()

    def taints_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """The sources of the rows among (tier, ref) keys that were written from untrusted text."""
        return self.repos.taints.of_keys(keys)

    def trust(self, taint_id: int, *, by: str, reason: str = "", now: datetime,
              by_person: int | None = None) -> Taint:
        """The owner trusts a row written from untrusted text: it is shown as the persona's own from the next tick
        and gates nothing; kept in the audit log. ApprovalError when there is no such taint, it was trusted already,
        or `by_person` (someone over a channel) is not an owner."""
        if by_person is not None and not self.house.people.is_owner(by_person):
            raise ApprovalError("only an owner trusts what came from outside")
        row = self.repos.taints.get(taint_id)
        if row is None:
            raise ApprovalError(f"no tainted row {taint_id}")
        if not self.repos.taints.clear(taint_id, by=by, reason=reason, now=now):
            raise ApprovalError(f"{row.tier} {row.ref} was trusted already (by {row.cleared_by})")
        derived = self.repos.taints.clear_derived(row.tier, row.ref, by=by, now=now)
        from_where = "; ".join(f"{s.get('origin')} {s.get('ref')}" for s in row.sources or [])
        self.repos.audit.add(thread_id=row.thread_id, tick=row.tick, cmd_key=f"taint:{row.id}", type=TRUST,
                             effect="write_self", decision="trusted", actor="human",
                             reason=f"{row.tier} {row.ref} (from {from_where[:400]}"
                                    + (f"; and {derived} row(s) written only through it" if derived else "")
                                    + f"): {by}" + (f": {reason}" if reason else ""), created_at=now)
        return row

    def get(self, approval_id: int) -> Approval | None:
        return self.repos.approvals.get(approval_id)

    def pending(self, limit: int | None = None) -> list[Approval]:
        """Waiting approvals, oldest first."""
        return self.repos.approvals.pending(limit)

    def listing(self, status: str | None = "pending", limit: int = 50) -> list[Approval]:
        """Approvals of one status (pending: oldest first; others newest first), or all (None) newest first."""
        if status == "pending":
            return self.repos.approvals.pending(limit)
        return self.repos.approvals.list(status=status, limit=limit)

    def decided(self, limit: int) -> list[Approval]:
        """The latest decided approvals, newest first."""
        return [a for a in self.repos.approvals.list(limit=limit * 2) if a.status != "pending"][:limit]

    def audit_log(self, limit: int) -> list[AuditEntry]:
        """The latest audit entries, oldest first."""
        return list(self.repos.audit.recent(limit))

    def audit_of(self, approval_id: int) -> list[AuditEntry]:
        return list(self.repos.audit.for_approval(approval_id))


def answer(db: Database, approval_id: int, *, approve: bool, by: str, reason: str = "", now: datetime) -> Approval:
    """`ConsentManager.answer` in a unit of its own (the doors that hold a database, not a transaction)."""
    from managers import Managers

    with db.unit() as repos:
        return Managers(repos).consent.answer(approval_id, approve=approve, by=by, reason=reason, now=now)


def trust(db: Database, taint_id: int, *, by: str, reason: str = "", now: datetime) -> Taint:
    """`ConsentManager.trust` in a unit of its own (the doors that hold a database, not a transaction)."""
    from managers import Managers

    with db.unit(actor="human") as repos:
        return Managers(repos).consent.trust(taint_id, by=by, reason=reason, now=now)
