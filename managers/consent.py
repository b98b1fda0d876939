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
transaction that moves the row from approved to executed commits: `executed_on_approval`, which a document's
settlement uses too); denied, it never runs and the persona reads the
denial, with its reason, in its next prompt. An idle loop wakes on the answer. A document sent over a channel
(`kb.add_document`, no command of the persona's) is settled at once: added to the knowledge base, or its kept bytes
deleted. Every decision goes to the audit log (`audit`, `record`).

Rows written from untrusted text (memory/taint.py) are listed here with where their words came from (`tainted`), and
the owner may trust one (`trust`): from then on it is shown as the persona's own and taints no prompt — an audited
human act, like an approval, from the page, the API or `run.py trust`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from managers.people import right
from managers.views import frozen, frozen_all
from memory import provenance
from memory.repositories.consent import canonical_args
from memory.taint import tainted, tracking_reads

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


@dataclass(frozen=True)
class CommandCall:
    """A command a tick asked for, as its exactly-once record keeps it (`cmd_key`: thread:tick:cmd_id)."""

    cmd_key: str
    thread_id: str
    tick: int
    cmd_id: str
    type: str
    args: dict[str, Any]
    description: str

    def fields(self) -> dict[str, Any]:
        return {
            "cmd_key": self.cmd_key,
            "thread_id": self.thread_id,
            "tick": self.tick,
            "cmd_id": self.cmd_id,
            "type": self.type,
            "args": self.args,
            "description": self.description,
        }


@dataclass(frozen=True)
class CommandOutcome:
    """What became of a command already recorded (its record is written once: a re-run step only reads it)."""

    status: str
    result: str | None


@dataclass(frozen=True)
class ApprovedCommand:
    """An approval as the command it runs (or the document it adds): what running it and recording its end need."""

    id: int
    cmd_key: str
    cmd_id: str
    type: str
    effect: str
    args: dict[str, Any]
    description: str
    thread_id: str

    @classmethod
    def of(cls, row: Approval) -> ApprovedCommand:
        return cls(
            id=row.id,
            cmd_key=row.cmd_key,
            cmd_id=row.cmd_id,
            type=row.type,
            effect=row.effect,
            args=dict(row.args or {}),
            description=row.description or "",
            thread_id=row.thread_id,
        )


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

    # -- a tick's command, recorded exactly once ---------------------------------------------------------------------

    def outcome(self, cmd_key: str) -> CommandOutcome | None:
        """What became of a command already recorded (a step run again after a kill does not run it twice)."""
        row = self.repos.commands.get(cmd_key)
        return CommandOutcome(row.status, row.result) if row is not None else None

    def _audit_call(self, verdict: Verdict, call: CommandCall, decision: str, now: datetime) -> None:
        self.audit(
            verdict,
            type=call.type,
            decision=decision,
            cmd_key=call.cmd_key,
            thread_id=call.thread_id,
            tick=call.tick,
            now=now,
        )

    def refused(self, call: CommandCall, status: str, reason: str) -> None:
        """A command that never reached the gate — unknown, bad arguments, switched off, withdrawn, not for this
        thread or audience — recorded with why."""
        self.repos.commands.record(**call.fields(), status=status, result=reason)

    def blocked(self, verdict: Verdict, call: CommandCall, *, now: datetime) -> str:
        """A command the gate refused: recorded (`blocked` by the ethics policy, else `unvalidated`) and audited; its
        status."""
        status = "blocked" if verdict.actor == "ethics" else "unvalidated"
        self.repos.commands.record(**call.fields(), status=status, result=verdict.reason)
        self._audit_call(verdict, call, "blocked", now)
        return status

    def parked_command(
        self, verdict: Verdict, call: CommandCall, *, root_thread: str, now: datetime
    ) -> tuple[int, bool, str]:
        """A command the gate parked: its pending approval (an identical one is reused) and its record saying it
        waits; (approval id, newly created, what the persona reads)."""
        row, created = self.park(
            verdict,
            cmd_key=call.cmd_key,
            cmd_id=call.cmd_id,
            type=call.type,
            args=call.args,
            description=call.description,
            thread_id=call.thread_id,
            root_thread=root_thread,
            tick=call.tick,
            now=now,
        )
        message = (
            f"waits for my human's approval (approval {row.id})"
            if created
            else f"already waiting for my human's approval (approval {row.id})"
        )
        self.repos.commands.record(**call.fields(), status="pending_approval", result=message)
        return row.id, created, message

    @contextmanager
    def tracked(
        self, untrusted: Sequence[provenance.Source], *, thread_id: str, tick: int
    ) -> Iterator[set[tuple[str, str]]]:
        """A command's run: every memory row it writes keeps the untrusted sources its tick read (memory/taint.py),
        and the (tier, ref) of every row it reads is collected (what its result shows)."""
        session = self.repos.session
        with tracking_reads(session) as read, tainted(session, list(untrusted), thread_id=thread_id, tick=tick):
            yield read

    def show_result(
        self,
        type: str,
        output: str,
        *,
        thread_id: str,
        sources: Sequence[provenance.Source],
        read: set[tuple[str, str]],
        tag: str | None,
    ) -> None:
        """A command's result the next prompt shows, in the process log with where its words came from: its own
        sources and those of the tainted rows it read (`tag`: a result read for a guest or a peer is shown again only
        while answering them)."""
        found = self.repos.taints.of_keys(read) if read else {}
        shown = provenance.merged(
            *(provenance.through(rows, provenance.via_of(tier, ref)) for (tier, ref), rows in found.items())
        )
        self.repos.processes.add(
            type,
            output,
            status="ok",
            thread_id=thread_id,
            sources=provenance.merged(sources, shown),
            tags=[tag] if tag else None,
        )

    def ran(self, verdict: Verdict, call: CommandCall, *, status: str, output: str, now: datetime) -> None:
        """A command the gate let run, run: its record, its use counted (HMP's frequently used tools and links),
        and the decision audited."""
        self.repos.commands.record(**call.fields(), status=status, result=output)
        if status == "executed":
            self.house.tool_uses.record(call.type, call.args, now=now)
        self._audit_call(verdict, call, "executed", now)

    def failed(self, call: CommandCall, message: str) -> None:
        """A command whose run raised (its effect rolled back), recorded as failed unless a run recorded it first."""
        if self.repos.commands.get(call.cmd_key) is None:
            self.repos.commands.record(**call.fields(), status="failed", result=message[:2000])

    def stranger(
        self, recipient: Mapping[str, object] | None, untrusted: Sequence[provenance.Source], note_ids: Sequence[int]
    ) -> str | None:
        """For a message the persona sends as itself from a tick that read untrusted text: whom it goes to (its
        label) when that is nobody who wrote any of the tick's text — the notes it answered (`note_ids`) or the
        untrusted text —, else None (a reply)."""
        if recipient is None or not untrusted:
            return None
        people, peers = provenance.authors(untrusted)
        for note in self.repos.notes.many(list(note_ids)):
            if note.author_id is not None:
                people.add(int(note.author_id))
            if (peer := provenance.note_author(note)) is not None:
                peers.add(peer.lower())
            peers.update(
                t.split(":", 1)[1].lower() for t in note.tags or [] if isinstance(t, str) and t.startswith("peer:")
            )
        if recipient.get("person") in people or str(recipient.get("peer", "")).lower() in peers:
            return None
        return str(recipient["label"])

    def thought_written_from(
        self, message_id: int, sources: Sequence[provenance.Source], *, thread_id: str, tick: int, now: datetime
    ) -> None:
        """A thought written from a prompt that held untrusted text keeps those sources (memory/taint.py)."""
        self.repos.taints.mark([("message", str(message_id))], list(sources), thread_id=thread_id, tick=tick, now=now)

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
            self.failed_on_approval(
                ApprovedCommand.of(row), message, tick=row.tick, now=now, told=("document.failed", message)
            )
            return
        result = (
            upload.skipped
            or f"{name} from {source} added to my knowledge base (doc {upload.doc_id}, {upload.chunks} chunks)"
        )
        self.executed_on_approval(
            ApprovedCommand.of(row),
            result,
            tick=row.tick,
            now=now,
            told=("document.added", f"my owner approved: {result} (approval {row.id})"),
        )

    # -- what the human approved, run ----------------------------------------------------------------------------------

    def approved_waiting(self, root_thread: str) -> list[int]:
        """The approvals of a root thread's commands the human approved and nothing ran yet, oldest first."""
        return [row.id for row in self.repos.approvals.approved_unexecuted(root_thread)]

    def approved_command(self, approval_id: int) -> ApprovedCommand | None:
        """An approval as the command it runs (None: no such approval; approvals are never deleted)."""
        row = self.repos.approvals.get(approval_id)
        return ApprovedCommand.of(row) if row is not None else None

    def executed_on_approval(
        self,
        approved: ApprovedCommand,
        result: str,
        *,
        status: str = "executed",
        tick: int,
        now: datetime,
        told: tuple[str, str] | None = None,
    ) -> bool:
        """What the human approved ran (a parked command at the persona's tick, a document when it was answered):
        the approval is marked executed — False when another process marked it first, and then the caller rolls
        its run back: it never runs twice —, the parked command's own record takes its `status`, the audit log
        names the human's approval, and the process log tells the persona (`told`: its name and text; by default
        that the human approved it and it ran)."""
        repos = self.repos
        if not repos.approvals.mark_executed(approved.id, result, now):
            return False
        if approved.type != DOCUMENT_APPROVAL:  # a document sent over a channel is no command of the persona's
            repos.commands.set_status(approved.cmd_key, status, result)
        repos.audit.add(
            thread_id=approved.thread_id,
            tick=tick,
            cmd_key=approved.cmd_key,
            type=approved.type,
            effect=approved.effect,
            decision="executed",
            actor="human",
            reason=f"approval {approved.id}",
            approval_id=approved.id,
            created_at=now,
        )
        name, text = told or (
            "approval.executed",
            f"my human approved {approved.type} (approval {approved.id}); it ran: {result}",
        )
        repos.processes.add(name, text[:2000], status="ok", thread_id=approved.thread_id)
        return True

    def failed_on_approval(
        self, approved: ApprovedCommand, message: str, *, tick: int, now: datetime, told: tuple[str, str] | None = None
    ) -> bool:
        """What the human approved failed when it ran (its effect rolled back): the approval is closed as failed —
        False when another process closed it first —, the parked command's record too, the audit log keeps why, and
        the process log tells the persona (`told`: its name and text)."""
        repos, message = self.repos, message[:2000]
        if not repos.approvals.mark_failed(approved.id, message, now):
            return False
        if approved.type != DOCUMENT_APPROVAL:
            repos.commands.set_status(approved.cmd_key, "failed", message)
        repos.audit.add(
            thread_id=approved.thread_id,
            tick=tick,
            cmd_key=approved.cmd_key,
            type=approved.type,
            effect=approved.effect,
            decision="failed",
            actor="loop",
            reason=message,
            approval_id=approved.id,
            created_at=now,
        )
        name, text = told or ("approval.failed", f"{approved.type} (approval {approved.id}) failed: {message}")
        repos.processes.add(name, text[:2000], status="error", thread_id=approved.thread_id)
        return True

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
