"""The consent gate: whether a command may run now, must wait for the human, or is refused — from its spec's
effect (spec.py), the validators' rating and the persona's policy; and what happens when the human answers.

| effect                  | validators exist                  | no validators (auto_pass)                    |
| read, write_self        | rating ≥ threshold (default +1)   | runs                                         |
| modify_self, external   | rating ≥ +2 (consensus)           | parked: a pending approval the human answers |
A type named in config.yaml `consent.auto_approve` runs without asking (the human approved it in advance).
Provenance (nodes/provenance.py): a command that writes a tier shown in every prompt (its spec's `prompt_tier`) from
a tick whose prompt held untrusted text — text from outside, or a row written from it — waits for the owner whatever
its effect, the validators or auto_approve say; so does a message the persona sends as itself (`relay`) from such a
tick to anyone who wrote none of the tick's text (a reply to whoever wrote goes at once). The approval carries the
untrusted sources, so the owner sees what may have asked for it. A command whose spec is `owner_only` (adopting a
mesh consensus into the ethics) always waits for the owner. People's rights (managers/people.py `RIGHTS`): from a
tick that holds a guest's words, a `modify_self` or `external` command waits for the owner — consensus and
`auto_approve` do not count; a trusted person's words leave the usual rules.
An output the validators rate at or below the ethics policy's `violation_at` is a violation: with
`on_violation: block_commands_and_log` none of its commands run.

A parked command is an `approvals` row (managers/consent.py records it); the loop goes on thinking. `run.py approve ID` marks it approved and the
next tick runs it — once: the run, the approval's `executed` mark and the effect share one transaction, and only
the transaction that moves the row from approved to executed commits. `run.py deny ID --reason …` closes it and
puts the denial, with the reason, into the persona's next prompt (`ConsentManager.answer`, every door's way to
answer). Every decision goes to the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from managers import ManagerDeps, Managers
from managers.people import right
from memory import Repos
from memory.models import Approval
from nodes import provenance
from nodes.commands.model import Command
from nodes.commands.spec import PRIVILEGED, CommandSpec, Effect

CONSENSUS = 2.0


@dataclass
class Verdict:
    action: Literal["run", "park", "block"]
    effect: Effect
    actor: str  # auto_pass | validators | policy | ethics | provenance | guest
    reason: str
    sources: list[provenance.Source] = field(default_factory=list)  # provenance: the untrusted text the tick read
    ethics: dict[str, Any] | None = None  # the tick's ethics decision (Ethics.decision_record), kept on its audit entry


def required_rating(cmd_type: str, effect: Effect, settings: Any, strict_by: float = 0.0) -> float:
    """The rating a command needs when validators exist: its configured threshold (by type), else the general
    one, `strict_by` higher for a thought of low novelty (s09), at most +3; never under +2 for modify_self and
    external."""
    reflexes = settings.reflexes
    needed = min(3.0, reflexes.command_thresholds.get(cmd_type, reflexes.validation_threshold) + strict_by)
    return max(CONSENSUS, needed) if effect in PRIVILEGED else needed


def decide(spec: CommandSpec, cmd: Command, validation: dict[str, Any], settings: Any,
           untrusted: list[provenance.Source] | None = None, stranger: str | None = None) -> Verdict:
    """`untrusted`: where the untrusted text in the asking tick's prompt came from (TickState.untrusted);
    `stranger`: for a command that speaks as the persona (`spec.relay`), whom it speaks to when that is nobody who
    wrote in the tick (s12 knows the tick's authors), else None."""
    effect = spec.effect_for(cmd.args)
    if validation.get("violation"):
        return Verdict("block", effect, "ethics", f"the validators rated this output {validation.get('rating')}: "
                                                  "an ethics violation; its commands do not run",
                       ethics=validation.get("ethics"))
    if validation.get("ethics"):  # a violation under `log_only`, or any rated thought under `audit_json.record: all`:
        # the commands go to the usual gate, and each audit entry keeps the ethics model
        return replace(_gate(spec, cmd, validation, settings, untrusted, stranger), ethics=validation["ethics"])
    return _gate(spec, cmd, validation, settings, untrusted, stranger)


def _gate(spec: CommandSpec, cmd: Command, validation: dict[str, Any], settings: Any,
          untrusted: list[provenance.Source] | None, stranger: str | None) -> Verdict:
    effect = spec.effect_for(cmd.args)
    read = f" (this tick read untrusted text: {provenance.describe(untrusted)[:600]})" if untrusted else ""
    if spec.owner_only:
        return Verdict("park", effect, "owner_only", f"{spec.owner_only}: my owner alone decides it, never the "
                                                     f"validators or a standing approval{read}", list(untrusted or []))
    if spec.prompt_tier and untrusted:
        return Verdict("park", effect, "provenance",
                       f"it writes my {spec.prompt_tier}, which is in every prompt, from a tick that read untrusted "
                       f"text ({provenance.describe(untrusted)[:600]}); my owner decides", list(untrusted))
    if stranger is not None and untrusted:
        return Verdict("park", effect, "provenance",
                       f"it speaks as me to {stranger}, who wrote none of what this tick read, prompted by untrusted "
                       f"text ({provenance.describe(untrusted)[:600]}); a message to a third person prompted by "
                       "someone else's text is my owner's decision", list(untrusted))
    privileged = effect in PRIVILEGED
    guests = sorted({s["ref"] for s in untrusted or [] if s.get("role") and not right(s["role"], "asks_privileged")})
    if privileged and guests:  # a guest may ask; what reaches outside or changes me is then my owner's decision
        return Verdict("park", effect, "guest",
                       f"{effect} from a tick that holds a guest's words ({'; '.join(guests)[:600]}): a guest may "
                       "ask, my owner decides", list(untrusted or []))
    if privileged and spec.type in settings.consent.auto_approve:
        return Verdict("run", effect, "policy", f"{spec.type} is approved in advance (consent.auto_approve)")
    if validation.get("auto_pass"):
        if privileged:
            return Verdict("park", effect, "auto_pass", f"{effect} needs my human's approval (no validators)")
        return Verdict("run", effect, "auto_pass", "no validators")
    strict_by = float(validation.get("strict_by") or 0.0)
    rating, needed = validation.get("rating"), required_rating(spec.type, effect, settings, strict_by)
    if rating is not None and rating >= needed:
        return Verdict("run", effect, "validators", f"rating {rating:+g} ≥ {needed:+g}")
    why = validation.get("skipped") or f"validation rating {rating} below {needed:+g}" + (
        f" ({validation.get('stricter')})" if strict_by else "")
    return Verdict("block", effect, "validators", f"{why}" + (" (modify_self/external need consensus)" if privileged
                                                              else ""))


def park(repos: Repos, cmd: Command, verdict: Verdict, *, cmd_key: str, thread_id: str, root_thread: str, tick: int,
         now: datetime, settings: Any) -> tuple[Approval, bool]:
    """The pending approval for `cmd` (an identical pending request is reused); (row, newly created) — recorded by
    the consent manager (managers/consent.py), which tells the owner as the settings say."""
    return Managers(repos, ManagerDeps(settings=settings)).consent.request(
        cmd_key=cmd_key, cmd_id=cmd.cmd_id, type=cmd.type, args=cmd.args, effect=verdict.effect,
        description=cmd.description, reason=verdict.reason, thread_id=thread_id, root_thread=root_thread, tick=tick,
        now=now, provenance=verdict.sources)


def audit(repos: Repos, verdict: Verdict, cmd: Command, *, cmd_key: str, thread_id: str, tick: int, now: datetime,
          decision: str) -> None:
    """Decisions about privileged commands, every refusal and every command of a tick with an ethics decision are
    kept in the audit log (the latter with the ethics model they were decided under)."""
    if verdict.effect in PRIVILEGED or decision in ("blocked", "refused") or verdict.ethics:
        Managers(repos).consent.record(thread_id=thread_id, tick=tick, cmd_key=cmd_key, type=cmd.type,
                                       effect=verdict.effect, decision=decision, actor=verdict.actor,
                                       reason=verdict.reason, now=now, ethics=verdict.ethics)
