"""Consent, in one place: whether a command may run now, must wait for the human, or is refused (the gate); the
approvals that wait; the audit log of every decision; the human's answer; and trusting a row written from untrusted
text. The tick (nodes/steps/s12), a playbook's command node, the web app, the command line and the channels all
come here.

**The gate** (`ConsentManager.decide`), from what is asked (`Asked`: the command's type, its effect for these
arguments, and what its spec says the gate must also know), the validators' rating and the persona's policy:

| effect                  | validators exist                  | no validators (auto_pass)                    |
| read, write_self        | rating ≥ threshold (default +1)   | runs                                         |
| modify_self, external   | rating ≥ +2 (consensus)           | parked: a pending approval the human answers |
A type named in config.yaml `consent.auto_approve` runs without asking (the human approved it in advance).
Provenance (memory/provenance.py): a command that writes a tier shown in every prompt (`prompt_tier`) from a tick
whose prompt held untrusted text — text from outside, or a row written from it — waits for the owner whatever its
effect, the validators or auto_approve say; so does a message the persona sends as itself (`relay`) from such a tick
to anyone who wrote none of the tick's text (a reply to whoever wrote goes at once). The approval carries the
untrusted sources, so the owner sees what may have asked for it. An `owner_only` command (adopting a mesh consensus
into the ethics) always waits for the owner. People's rights (managers/people.py `RIGHTS`): from a tick that holds a
guest's words, a `modify_self` or `external` command waits for the owner — consensus and `auto_approve` do not
count; a trusted person's words leave the usual rules. An output the validators rate at or below the ethics
policy's `violation_at` is a violation: with `on_violation: block_commands_and_log` none of its commands run.

**Approvals.** A parked command is an `approvals` row (`request`); the loop goes on thinking. The human answers from
any door — `run.py approve/deny`, the web app, the MCP server — through `answer`: approved, the command runs once at
the persona's next tick (the run, the approval's `executed` mark and the effect share one transaction, and only the
transaction that moves the row from approved to executed commits); denied, it never runs and the persona reads the
denial, with its reason, in its next prompt. An idle loop wakes on the answer. A document sent over a channel
(`kb.add_document`, no command of the persona's) is settled at once: added to the knowledge base, or its kept bytes
deleted. Every decision goes to the audit log (`audit`, `record`).

Rows written from untrusted text (memory/taint.py) are listed here with where their words came from (`tainted`), and
the owner may trust one (`trust`): from then on it is shown as the persona's own and taints no prompt — an audited
human act, like an approval, from the page, the API or `run.py trust`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from managers.people import right
from managers.views import frozen, frozen_all
from memory import provenance
from memory.repositories.consent import canonical_args

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import Approval
    from persona.settings import Settings

Effect = Literal["read", "write_self", "modify_self", "external"]
EFFECTS: tuple[Effect, ...] = ("read", "write_self", "modify_self", "external")  # weakest first
PRIVILEGED: frozenset[str] = frozenset({"modify_self", "external"})
CONSENSUS = 2.0


DOCUMENT_APPROVAL = "kb.add_document"  # a text document someone other than the owner sent over a channel
TRUST = "provenance.trust"  # the audit log's name for the owner trusting a row written from untrusted text


class ApprovalError(ValueError):
    """No such approval, or it is no longer pending."""


@dataclass(frozen=True)
class ApprovalView:
    """A command that waits (or waited) for the human's consent, and what became of it."""

    id: int
    created_at: datetime
    thread_id: str
    root_thread: str
    tick: int
    cmd_key: str
    cmd_id: str
    type: str
    args: dict[str, Any]
    effect: str
    description: str
    reason: str
    status: str  # pending | approved | denied | executed | failed | expired
    decided_at: datetime | None
    decided_by: str | None
    decision_reason: str | None
    executed_at: datetime | None
    result: str | None
    provenance: list[Any]  # the untrusted text the asking tick had read


@dataclass(frozen=True)
class AuditView:
    """One entry of the audit log: a request, decision or outcome for a command."""

    id: int
    created_at: datetime
    thread_id: str | None
    tick: int | None
    cmd_key: str | None
    type: str
    effect: str | None
    decision: str
    actor: str
    reason: str
    approval_id: int | None
    ethics: dict[str, Any] | None


@dataclass(frozen=True)
class TaintView:
    """A row written from untrusted text: which (tier and ref), from where, and whether the owner trusted it."""

    id: int
    tier: str
    ref: str
    sources: list[Any]  # provenance.Source dicts
    thread_id: str | None
    tick: int | None
    created_at: datetime
    updated_at: datetime
    cleared_at: datetime | None
    cleared_by: str | None
    cleared_reason: str


@dataclass(frozen=True)
class Asked:
    """What the gate is asked about: a command's type, its effect for the arguments given, and what its spec says
    the gate must also know (nodes/commands/spec.py)."""

    type: str
    effect: Effect
    prompt_tier: str | None = None  # the tier shown in every prompt that it writes
    owner_only: str | None = None  # only the owner ever decides it (why)


@dataclass(frozen=True)
class Verdict:
    action: Literal["run", "park", "block"]
    effect: Effect
    actor: str  # auto_pass | validators | policy | ethics | provenance | guest | owner_only
    reason: str
    sources: list[provenance.Source] = field(default_factory=list)  # provenance: the untrusted text the tick read
    ethics: dict[str, Any] | None = None  # the tick's ethics decision (Ethics.decision_record), kept on its audit entry


def required_rating(cmd_type: str, effect: Effect, settings: Settings, strict_by: float = 0.0) -> float:
    """The rating a command needs when validators exist: its configured threshold (by type), else the general
    one, `strict_by` higher for a thought of low novelty (s09), at most +3; never under +2 for modify_self and
    external."""
    reflexes = settings.reflexes
    needed = min(3.0, reflexes.command_thresholds.get(cmd_type, reflexes.validation_threshold) + strict_by)
    return max(CONSENSUS, needed) if effect in PRIVILEGED else needed


class ConsentManager:
    """Approvals and the audit log, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- the gate ----------------------------------------------------------------------------------------------------

    def decide(
        self,
        asked: Asked,
        validation: dict[str, Any],
        untrusted: list[provenance.Source] | None = None,
        stranger: str | None = None,
    ) -> Verdict:
        """`untrusted`: where the untrusted text in the asking tick's prompt came from (TickState.untrusted);
        `stranger`: for a command that speaks as the persona (`spec.relay`), whom it speaks to when that is nobody who
        wrote in the tick (s12 knows the tick's authors), else None."""
        effect = asked.effect
        if validation.get("violation"):
            return Verdict(
                "block",
                effect,
                "ethics",
                f"the validators rated this output {validation.get('rating')}: "
                "an ethics violation; its commands do not run",
                ethics=validation.get("ethics"),
            )
        if validation.get(
            "ethics"
        ):  # a violation under `log_only`, or any rated thought under `audit_json.record: all`:
            # the commands go to the usual gate, and each audit entry keeps the ethics model
            return replace(self._gate(asked, validation, untrusted, stranger), ethics=validation["ethics"])
        return self._gate(asked, validation, untrusted, stranger)

    def _gate(
        self, asked: Asked, validation: dict[str, Any], untrusted: list[provenance.Source] | None, stranger: str | None
    ) -> Verdict:
        effect, settings = asked.effect, self.house.deps.settings
        read = f" (this tick read untrusted text: {provenance.describe(untrusted)[:600]})" if untrusted else ""
        if asked.owner_only:
            return Verdict(
                "park",
                effect,
                "owner_only",
                f"{asked.owner_only}: my owner alone decides it, never the validators or a standing approval{read}",
                list(untrusted or []),
            )
        if asked.prompt_tier and untrusted:
            return Verdict(
                "park",
                effect,
                "provenance",
                f"it writes my {asked.prompt_tier}, which is in every prompt, from a tick that read untrusted "
                f"text ({provenance.describe(untrusted)[:600]}); my owner decides",
                list(untrusted),
            )
        if stranger is not None and untrusted:
            return Verdict(
                "park",
                effect,
                "provenance",
                f"it speaks as me to {stranger}, who wrote none of what this tick read, prompted by untrusted "
                f"text ({provenance.describe(untrusted)[:600]}); a message to a third person prompted by "
                "someone else's text is my owner's decision",
                list(untrusted),
            )
        privileged = effect in PRIVILEGED
        guests = sorted(
            {s["ref"] for s in untrusted or [] if s.get("role") and not right(s["role"], "asks_privileged")}
        )
        if privileged and guests:  # a guest may ask; what reaches outside or changes me is then my owner's decision
            return Verdict(
                "park",
                effect,
                "guest",
                f"{effect} from a tick that holds a guest's words ({'; '.join(guests)[:600]}): a guest may "
                "ask, my owner decides",
                list(untrusted or []),
            )
        if privileged and asked.type in settings.consent.auto_approve:
            return Verdict("run", effect, "policy", f"{asked.type} is approved in advance (consent.auto_approve)")
        if validation.get("auto_pass"):
            if privileged:
                return Verdict("park", effect, "auto_pass", f"{effect} needs my human's approval (no validators)")
            return Verdict("run", effect, "auto_pass", "no validators")
        strict_by = float(validation.get("strict_by") or 0.0)
        rating, needed = validation.get("rating"), required_rating(asked.type, effect, settings, strict_by)
        if rating is not None and rating >= needed:
            return Verdict("run", effect, "validators", f"rating {rating:+g} ≥ {needed:+g}")
        why = validation.get("skipped") or f"validation rating {rating} below {needed:+g}" + (
            f" ({validation.get('stricter')})" if strict_by else ""
        )
        return Verdict(
            "block", effect, "validators", f"{why}" + (" (modify_self/external need consensus)" if privileged else "")
        )

    def audit(
        self, verdict: Verdict, *, type: str, cmd_key: str, thread_id: str, tick: int, now: datetime, decision: str
    ) -> None:
        """Decisions about privileged commands, every refusal and every command of a tick with an ethics decision
        are kept in the audit log (the latter with the ethics model they were decided under)."""
        if verdict.effect in PRIVILEGED or decision in ("blocked", "refused") or verdict.ethics:
            self.record(
                thread_id=thread_id,
                tick=tick,
                cmd_key=cmd_key,
                type=type,
                effect=verdict.effect,
                decision=decision,
                actor=verdict.actor,
                reason=verdict.reason,
                now=now,
                ethics=verdict.ethics,
            )

    def park(
        self,
        verdict: Verdict,
        *,
        cmd_key: str,
        cmd_id: str,
        type: str,
        args: dict[str, Any],
        description: str,
        thread_id: str,
        root_thread: str,
        tick: int,
        now: datetime,
    ) -> tuple[ApprovalView, bool]:
        """The pending approval for a command the gate parked (an identical pending request is reused); (row, newly
        created) — the owner is told as the settings say."""
        return self.request(
            cmd_key=cmd_key,
            cmd_id=cmd_id,
            type=type,
            args=args,
            effect=verdict.effect,
            description=description,
            reason=verdict.reason,
            thread_id=thread_id,
            root_thread=root_thread,
            tick=tick,
            now=now,
            provenance=verdict.sources,
        )

    # -- what the gate decided -------------------------------------------------------------------------------------

    def request(
        self,
        *,
        cmd_key: str,
        cmd_id: str,
        type: str,
        args: dict[str, Any],
        effect: str,
        description: str,
        reason: str,
        thread_id: str,
        root_thread: str,
        tick: int,
        now: datetime,
        provenance: Sequence[Any] = (),
    ) -> tuple[ApprovalView, bool]:
        """The pending approval for a command (an identical pending request is reused); (row, newly created). A new
        one is audited and told in the process log."""
        repos = self.repos
        row, created = repos.approvals.request(
            cmd_key=cmd_key,
            cmd_id=cmd_id,
            type=type,
            args=args,
            effect=effect,
            description=description,
            reason=reason,
            thread_id=thread_id,
            root_thread=root_thread,
            tick=tick,
            created_at=now,
            provenance=list(provenance),
        )
        if created:
            repos.audit.add(
                thread_id=thread_id,
                tick=tick,
                cmd_key=cmd_key,
                type=type,
                effect=effect,
                decision="requested",
                actor="loop",
                reason=reason,
                approval_id=row.id,
                created_at=now,
            )
            repos.processes.add(
                "approval.requested",
                f"{type} waits for my human's approval (approval {row.id}): {reason}",
                status="close",
                thread_id=thread_id,
            )
            self._tell_owner(row, now)
        return frozen(ApprovalView, row), created

    def _tell_owner(self, row: Approval, now: datetime) -> None:
        """The owner hears of a new approval once, on their channel (the Approvals page's badge says it too)."""
        from managers import notices

        owner = self.house.people.owner()
        settings = self.house.deps.settings
        language = owner.language or settings.prompt_language
        text = notices.say(notices.APPROVAL, language, command=row.type, id=row.id, reason=(row.reason or "")[:300])
        self.house.conversation.notify_owner(f"approval:{row.id}", text, now=now)

    def record(
        self,
        *,
        thread_id: str,
        tick: int,
        cmd_key: str,
        type: str,
        effect: str,
        decision: str,
        actor: str,
        reason: str,
        now: datetime,
        ethics: dict[str, Any] | None = None,
    ) -> AuditView:
        """One decision in the audit log (`ethics`: the ethics model an ethics decision was taken under)."""
        entry = self.repos.audit.add(
            thread_id=thread_id,
            tick=tick,
            cmd_key=cmd_key,
            type=type,
            effect=effect,
            decision=decision,
            actor=actor,
            reason=reason,
            created_at=now,
            ethics=ethics,
        )
        return frozen(AuditView, entry)

    # -- the human's side ----------------------------------------------------------------------------------------

    def answer(
        self, approval_id: int, *, approve: bool, by: str, reason: str = "", now: datetime, by_person: int | None = None
    ) -> ApprovalView:
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
        repos.audit.add(
            thread_id=row.thread_id,
            tick=row.tick,
            cmd_key=row.cmd_key,
            type=row.type,
            effect=row.effect,
            decision="approved" if approve else "denied",
            actor="human",
            reason=f"{by}: {reason}" if reason else by,
            approval_id=row.id,
            created_at=now,
        )
        if row.type == DOCUMENT_APPROVAL:
            self._settle_document(row, approve=approve, reason=reason, now=now)
            return frozen(ApprovalView, row)
        if not approve:
            because = f": {reason}" if reason else " (no reason given)"
            repos.processes.add(
                "approval.denied",
                f"my human denied {row.type} {canonical_args(row.args)[:200]} (approval {row.id}){because}",
                status="error",
                thread_id=row.thread_id,
            )
            repos.commands.set_status(row.cmd_key, "denied", f"denied by my human{because}")
        return frozen(ApprovalView, row)

    def _settle_document(self, row: Approval, *, approve: bool, reason: str, now: datetime) -> None:
        """A document someone sent over a channel (managers/channels.py), settled at once — it is no command of the
        persona's, nothing waits for a tick: approved, it joins the knowledge base with its sender as its source
        (its chunks are data like every knowledge-base text: fenced in the prompt, an untrusted source for the
        consent gate); refused, its kept bytes are deleted and the note keeps the reference. The persona reads
        either in its process log."""
        repos, args = self.repos, dict(row.args or {})
        name, source, path = (
            str(args.get("document", "document")),
            str(args.get("from", "")),
            Path(str(args.get("path"))),
        )
        if not approve:
            self.house.memory.drop_kept_document(path)
            because = f": {reason}" if reason else ""
            repos.processes.add(
                "document.refused",
                f"my owner kept {name} from {source} out of my knowledge base "
                f"(approval {row.id}){because}; it stays a reference",
                status="close",
                thread_id=row.thread_id,
            )
            return
        author = source.split(" (", 1)[0]
        try:
            if not path.is_file():
                raise FileNotFoundError(f"{name} is no longer kept under the data dir")
            upload = self.house.memory.add_kept_document(path, source=source, author=author, filename=name)
        except (OSError, ValueError) as exc:
            message = f"{name} could not be added: {exc}"
            repos.approvals.mark_failed(row.id, message[:2000], now)
            repos.audit.add(
                thread_id=row.thread_id,
                tick=row.tick,
                cmd_key=row.cmd_key,
                type=row.type,
                effect=row.effect,
                decision="failed",
                actor="loop",
                reason=message[:2000],
                approval_id=row.id,
                created_at=now,
            )
            repos.processes.add("document.failed", message[:2000], status="error", thread_id=row.thread_id)
            return
        result = (
            upload.skipped
            or f"{name} from {source} added to my knowledge base (doc {upload.doc_id}, {upload.chunks} chunks)"
        )
        repos.approvals.mark_executed(row.id, result, now)
        repos.audit.add(
            thread_id=row.thread_id,
            tick=row.tick,
            cmd_key=row.cmd_key,
            type=row.type,
            effect=row.effect,
            decision="executed",
            actor="human",
            reason=f"approval {row.id}",
            approval_id=row.id,
            created_at=now,
        )
        repos.processes.add(
            "document.added", f"my owner approved: {result} (approval {row.id})", status="ok", thread_id=row.thread_id
        )

    # -- rows written from untrusted text ----------------------------------------------------------------------------

    def tainted(self, limit: int = 50) -> list[tuple[TaintView, str]]:
        """The rows written from untrusted text that still taint every prompt that shows them, newest first, each
        with what it says now."""
        taints = self.repos.taints
        return [(frozen(TaintView, row), taints.row_text(row.tier, row.ref)) for row in taints.active(limit)]

    def taint(self, taint_id: int) -> tuple[TaintView, str] | None:
        """A row written from untrusted text, and what it says now (None: no such taint)."""
        row = self.repos.taints.get(taint_id)
        return (frozen(TaintView, row), self.repos.taints.row_text(row.tier, row.ref)) if row is not None else None

    def tainted_count(self) -> int:
        return self.repos.taints.count_active()

    def taints_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """The sources of the rows among (tier, ref) keys that were written from untrusted text."""
        return self.repos.taints.of_keys(keys)

    def trust(
        self, taint_id: int, *, by: str, reason: str = "", now: datetime, by_person: int | None = None
    ) -> TaintView:
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
        self.repos.audit.add(
            thread_id=row.thread_id,
            tick=row.tick,
            cmd_key=f"taint:{row.id}",
            type=TRUST,
            effect="write_self",
            decision="trusted",
            actor="human",
            reason=f"{row.tier} {row.ref} (from {from_where[:400]}"
            + (f"; and {derived} row(s) written only through it" if derived else "")
            + f"): {by}"
            + (f": {reason}" if reason else ""),
            created_at=now,
        )
        return frozen(TaintView, row)

    def get(self, approval_id: int) -> ApprovalView | None:
        row = self.repos.approvals.get(approval_id)
        return frozen(ApprovalView, row) if row is not None else None

    def pending(self, limit: int | None = None) -> list[ApprovalView]:
        """Waiting approvals, oldest first."""
        return frozen_all(ApprovalView, self.repos.approvals.pending(limit))

    def pending_count(self) -> int:
        return len(self.repos.approvals.pending())

    def listing(self, status: str | None = "pending", limit: int = 50) -> list[ApprovalView]:
        """Approvals of one status (pending: oldest first; others newest first), or all (None) newest first."""
        if status == "pending":
            return frozen_all(ApprovalView, self.repos.approvals.pending(limit))
        return frozen_all(ApprovalView, self.repos.approvals.list(status=status, limit=limit))

    def decided(self, limit: int) -> list[ApprovalView]:
        """The latest decided approvals, newest first."""
        rows = [a for a in self.repos.approvals.list(limit=limit * 2) if a.status != "pending"][:limit]
        return frozen_all(ApprovalView, rows)

    def audit_log(self, limit: int) -> list[AuditView]:
        """The latest audit entries, oldest first."""
        return frozen_all(AuditView, self.repos.audit.recent(limit))

    def audit_of(self, approval_id: int) -> list[AuditView]:
        return frozen_all(AuditView, self.repos.audit.for_approval(approval_id))
