"""The mesh: mesh.* (send, ask, publish, subscribe, sync, status, case, cases, vote, adopt, reject, rotate; goals:
goal_publish, goals, goal_accept, goal_decline; offers: offer, offers, offer_accept, offer_decline) and reputation.*
(show, evaluate, block, unblock, drift). Thin over managers/mesh.py, managers/exchange.py and managers/reputation.py;
the mesh door (mesh/) sends what these queue. Whatever leaves the persona is `external` (consent); writing a
consensus into ethics.yaml, taking a peer's goal or offer and changing the key are `modify_self`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from managers.errors import NotFound, Refused
from nodes.commands.args import Args, Limit, Text, Word
from nodes.commands.model import Command
from nodes.commands.spec import Addressee, CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("mesh", "peers: signed containers, CogSync, consensus")
REPUTATION = Family("reputation", "peers' trust")

Did = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^did:key:z[1-9A-HJ-NP-Za-km-z]{40,60}$")]
ContainerId = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^sha256:[0-9a-f]{64}$")]
Score = Annotated[float, Field(ge=-1, le=1)]


def mesh_off(settings: Any) -> str | None:
    return None if settings.mesh.enabled else "the mesh is off (config.yaml mesh.enabled)"


class SendArgs(Args):
    to: Did | None = None
    text: Text


class AskArgs(Args):
    to: Did
    text: Text


class PublishArgs(Args):
    tag: Word
    tier: Literal["diary", "concept", "abstract"] = "diary"
    limit: Limit = 10


class TopicArgs(Args):
    topic: Word


class CaseArgs(Args):
    question: Text
    solutions: Annotated[list[Text], Field(max_length=10)] = []
    kind: Literal["ethics_case", "claim"] = "ethics_case"


class VoteArgs(Args):
    case: ContainerId
    solution: ContainerId | None = None
    score: Score | None = None


class CaseRefArgs(Args):
    case: ContainerId


class ContainerArgs(Args):
    container: ContainerId


class NoArgs(Args):
    pass


class EvaluateArgs(Args):
    peer: Did
    score: Score
    about: ContainerId | None = None
    reason: Annotated[str, StringConstraints(max_length=200)] = ""


class PeerArgs(Args):
    peer: Did
    reason: Annotated[str, StringConstraints(max_length=200)] = ""


def _queued(container: dict[str, Any]) -> str:
    return f"{container['type']} {container['id'][:19]}… queued (sent when a peer is reachable)"


def _peer(cmd: Command, ctx: CommandContext) -> Addressee | None:
    """Whom a signed message speaks to (the consent gate's relay rule): a peer's DID, or every peer."""
    to = cmd.args.get("to")
    return {"label": f"peer {to}", "peer": str(to)} if to else {"label": "every peer"}


@FAMILY.command(
    "mesh.send",
    '{"to": "did:key:…", "text": "…"}  (a signed message; no "to": every peer)',
    args=SendArgs,
    effect="external",
    unavailable=mesh_off,
    relay=_peer,
)
def send(cmd: Command, ctx: CommandContext) -> CommandResult:
    container = ctx.managers.mesh.compose(
        "message", {"text": str(arg(cmd, "text"))}, recipient=arg(cmd, "to", default=None)
    )
    return CommandResult(_queued(container))


@FAMILY.command(
    "mesh.ask",
    '{"to": "did:key:…", "text": "a question"}  (its answer arrives as a note)',
    args=AskArgs,
    effect="external",
    unavailable=mesh_off,
    relay=_peer,
)
def ask(cmd: Command, ctx: CommandContext) -> CommandResult:
    container = ctx.managers.mesh.compose("ask", {"text": str(arg(cmd, "text"))}, recipient=str(arg(cmd, "to")))
    return CommandResult(_queued(container))


@FAMILY.command(
    "mesh.publish",
    '{"tag": "tides", "tier": "diary|concept|abstract"}  (CogSync: my memories with '
    "this tag go to the peers subscribed to it)",
    args=PublishArgs,
    effect="external",
    unavailable=mesh_off,
)
def publish(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        sent = ctx.managers.mesh.publish(
            str(arg(cmd, "tag")), tier=str(arg(cmd, "tier", default="diary")), limit=int(arg(cmd, "limit", default=10))
        )
    except ValueError as exc:
        raise CommandError(f"mesh.publish: {exc}") from None
    return CommandResult(f"{len(sent)} queued under {arg(cmd, 'tag')!r}" if sent else "nothing new to publish")


@FAMILY.command(
    "mesh.subscribe",
    '{"topic": "tides"}  (learn what peers publish under it: data, never orders)',
    args=TopicArgs,
    effect="external",
    unavailable=mesh_off,
)
def subscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    new = ctx.managers.mesh.subscribe(str(arg(cmd, "topic")))
    return CommandResult(("subscribed to " if new else "already subscribed to ") + str(arg(cmd, "topic")))


@FAMILY.command("mesh.unsubscribe", '{"topic": "tides"}', args=TopicArgs, effect="write_self", unavailable=mesh_off)
def unsubscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    gone = ctx.managers.mesh.unsubscribe(str(arg(cmd, "topic")))
    return CommandResult("unsubscribed" if gone else "was not subscribed")


@FAMILY.command(
    "mesh.sync",
    "{}  (what waits in the outbox; the mesh door syncs with every peer it reaches)",
    args=NoArgs,
    effect="read",
    unavailable=mesh_off,
)
def sync(cmd: Command, ctx: CommandContext) -> CommandResult:
    mesh = ctx.managers.mesh
    return CommandResult(f"outbox: {len(mesh.outbox())} waiting; holding {len(mesh.have())} containers", show=True)


@FAMILY.command("mesh.status", "{}", args=NoArgs, effect="read")
def status(cmd: Command, ctx: CommandContext) -> CommandResult:
    state = ctx.managers.mesh.status()
    refused = ", ".join(f"{k} {v}" for k, v in sorted(state["refused"].items())) or "none"
    return CommandResult(
        f"me: {state['did']}; containers: {state['containers']}; refused: {refused}; "
        f"topics: {', '.join(state['subscriptions']) or 'none'}; outbox: {state['outbox']}",
        show=True,
    )


@FAMILY.command(
    "mesh.case",
    '{"question": "…", "solutions": ["…", "…"], "kind": "ethics_case|claim"}  (ask the '
    "peers: an ethics case or a claim to evaluate)",
    args=CaseArgs,
    effect="external",
    unavailable=mesh_off,
)
def case(cmd: Command, ctx: CommandContext) -> CommandResult:
    opened = ctx.managers.mesh.open_case(
        str(arg(cmd, "question")),
        arg(cmd, "solutions", default=[], kind=list),
        kind=str(arg(cmd, "kind", default="ethics_case")),
    )
    if opened.get("emergency") is not None:  # Isolated Mode: the consensus waits; the decision is mine meanwhile
        return CommandResult(
            f"case {opened['id']} opened; the mesh is unreachable (Isolated Mode), so it waits in my "
            f"outbox, and diary {opened['emergency']} (emergency_consensus) marks that I decide alone "
            "meanwhile, for review when the mesh is back",
            show=True,
        )
    return CommandResult(f"case {opened['id']} opened", show=True)


@FAMILY.command(
    "mesh.vote",
    '{"case": "sha256:…", "solution": "sha256:…"} or {"case": …, "score": 0.5}',
    args=VoteArgs,
    effect="external",
    unavailable=mesh_off,
)
def vote(cmd: Command, ctx: CommandContext) -> CommandResult:
    if arg(cmd, "solution", default=None) is None and arg(cmd, "score", default=None) is None:
        raise CommandError("mesh.vote: a solution or a score")
    container = ctx.managers.mesh.vote(
        str(arg(cmd, "case")), solution=arg(cmd, "solution", default=None), score=arg(cmd, "score", default=None)
    )
    return CommandResult(_queued(container))


@FAMILY.command("mesh.tally", '{"case": "sha256:…"}', args=CaseRefArgs, effect="read")
def tally(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        result = ctx.managers.mesh.tally(str(arg(cmd, "case")))
    except KeyError as exc:
        raise CommandError(f"mesh.tally: {exc}") from None
    return CommandResult(f"{result.question}: {result.votes} votes; result: {result.result or 'none yet'}", show=True)


@FAMILY.command(
    "mesh.adopt",
    '{"case": "sha256:…"}  (write the consensus into my ethics.yaml: my owner decides)',
    args=CaseRefArgs,
    effect="modify_self",
    owner_only="adopting a consensus of my peers into my ethics",
)
def adopt(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        principle = ctx.managers.mesh.adopt(str(arg(cmd, "case")))
    except (KeyError, ValueError) as exc:
        raise CommandError(f"mesh.adopt: {exc}") from None
    return CommandResult(f"ethics.yaml: + {principle}")


@FAMILY.command(
    "mesh.reject",
    '{"container": "sha256:…"}  (what a peer taught: archived, the peer trusted less)',
    args=ContainerArgs,
    effect="write_self",
)
def reject(cmd: Command, ctx: CommandContext) -> CommandResult:
    done = ctx.managers.mesh.reject(str(arg(cmd, "container")))
    return CommandResult("rejected" if done else "nothing to reject")


@FAMILY.command(
    "mesh.rotate", "{}  (a new key pair; the old one signs the hand-over)", args=NoArgs, effect="modify_self"
)
def rotate(cmd: Command, ctx: CommandContext) -> CommandResult:
    container = ctx.managers.mesh.rotate()
    return CommandResult(f"rotated to {container['payload']['new']}")


class ShowArgs(Args):
    limit: Limit = 20


@REPUTATION.command("reputation.show", '{"limit": 20}', args=ShowArgs, effect="read")
def show(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.reputation.table()[: int(arg(cmd, "limit", default=20))]
    lines = [
        f"{r.did}: trust {r.trust:+.2f}, {r.evaluations} evaluations, {r.refusals} refused"
        + (" (blocked)" if r.blocked else "")
        for r in rows
    ]
    return CommandResult("\n".join(lines) or "no peers known yet", show=True)


@REPUTATION.command(
    "reputation.evaluate",
    '{"peer": "did:key:…", "score": 0.5, "about": "sha256:…"}  (signed, sent to the peers)',
    args=EvaluateArgs,
    effect="external",
    unavailable=mesh_off,
)
def evaluate(cmd: Command, ctx: CommandContext) -> CommandResult:
    peer, score = str(arg(cmd, "peer")), float(arg(cmd, "score"))
    about, reason = arg(cmd, "about", default=None), str(arg(cmd, "reason", default=""))
    ctx.managers.reputation.evaluate(peer, score, about=about, reason=reason)
    container = ctx.managers.mesh.compose(
        "evaluation", {"subject": peer, "score": score, "about": about, "reason": reason}
    )
    return CommandResult(f"trust of {peer}: {ctx.managers.reputation.trust(peer):+.2f}; " + _queued(container))


@REPUTATION.command("reputation.block", '{"peer": "did:key:…", "reason": "…"}', args=PeerArgs, effect="write_self")
def block(cmd: Command, ctx: CommandContext) -> CommandResult:
    ctx.managers.reputation.block(str(arg(cmd, "peer")), str(arg(cmd, "reason", default="")))
    return CommandResult("blocked")


@REPUTATION.command("reputation.unblock", '{"peer": "did:key:…"}', args=PeerArgs, effect="write_self")
def unblock(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult("unblocked" if ctx.managers.reputation.unblock(str(arg(cmd, "peer"))) else "was not blocked")


@REPUTATION.command(
    "reputation.drift",
    "{}  (how far each evaluator strays from the others, now and before)",
    args=NoArgs,
    effect="read",
)
def drift(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.reputation.drift()
    return CommandResult(
        "\n".join(
            f"{did}: {d['recent']:.2f} now, {d['before']:.2f} before (drift {d['drift']:+.2f})"
            for did, d in rows.items()
        )
        or "no evaluations to compare",
        show=True,
    )


# ---- what peers put to the persona, and what it puts to them (managers/exchange.py) ----------------------------------


class ListArgs(Args):
    limit: Limit = 20


class GoalRefArgs(Args):
    goal: Annotated[int, Field(ge=1)]


class OfferArgs(Args):
    kind: Literal["strategy", "thinking_method", "model_address"]
    name: Word


def _exchange_error(command: str, exc: Exception) -> CommandError:
    return CommandError(f"{command}: {exc}")


class CasesArgs(ListArgs):
    unvoted: bool = False


@FAMILY.command(
    "mesh.cases",
    '{"unvoted": true, "limit": 20}  (the consensus cases and claims I know, mine and my '
    "peers': their solutions, the tally, my vote; unvoted: only those still waiting for my vote)",
    args=CasesArgs,
    effect="read",
)
def cases(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.exchange.cases(
        limit=int(arg(cmd, "limit", default=20)), unvoted=bool(arg(cmd, "unvoted", default=False))
    )
    lines = []
    for row in rows:
        voted = (
            "not yet"
            if row["my_vote"] is None
            else (
                f"score {row['my_vote']['score']:+.2f}"
                if "score" in row["my_vote"]
                else f"solution {str(row['my_vote'].get('solution', ''))[:19]}…"
            )
        )
        result = row["result"] or "none yet"
        lines.append(
            f"- {row['kind']} {row['id']} by {row['by']}: {row['question']} — {row['votes']} votes, result "
            f"{result}; my vote: {voted}"
        )
        lines += [f"    solution {sid}: {text}" for sid, text in row["solutions"].items()]
    return CommandResult("\n".join(lines) or "no consensus cases known", show=True)


@FAMILY.command(
    "mesh.goal_publish",
    '{"goal": 3}  (put one of my goals to my peers, signed: HMP GMP)',
    args=GoalRefArgs,
    effect="external",
    unavailable=mesh_off,
)
def goal_publish(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        container = ctx.managers.exchange.publish_goal(int(arg(cmd, "goal")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.goal_publish", exc) from None
    return CommandResult(_queued(container))


def _pending_line(item: Any) -> str:
    payload = item.payload
    gist = (
        payload.get("title")
        or payload.get("instruction")
        or f"{payload.get('model')} at {payload.get('base_url')} {payload.get('notes', '')}".strip()
    )
    name = f" {payload['name']!r}" if payload.get("name") else ""
    became = f" → {item.became}" if item.became else ""
    return f"- {item.type}{name} {item.id} from {item.label}: {gist} [{item.state}{became}]"


@FAMILY.command(
    "mesh.goals",
    '{"limit": 20}  (goals my peers published, and what became of each here)',
    args=ListArgs,
    effect="read",
)
def goals(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.exchange.peer_goals(limit=int(arg(cmd, "limit", default=20)))
    return CommandResult("\n".join(_pending_line(r) for r in rows) or "no peer published a goal yet", show=True)


@FAMILY.command(
    "mesh.goal_accept",
    '{"container": "sha256:…"}  (make a peer\'s goal one of mine; my owner decides)',
    args=ContainerArgs,
    effect="modify_self",
    owner_only="taking a peer's goal as one of mine",
)
def goal_accept(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        goal_id, status = ctx.managers.exchange.accept_goal(str(arg(cmd, "container")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.goal_accept", exc) from None
    return CommandResult(f"goal {goal_id} is mine now; its publisher is told: {_queued(status)}")


@FAMILY.command(
    "mesh.goal_decline",
    '{"container": "sha256:…"}  (set a peer\'s goal aside)',
    args=ContainerArgs,
    effect="write_self",
)
def goal_decline(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        ctx.managers.exchange.decline_goal(str(arg(cmd, "container")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.goal_decline", exc) from None
    return CommandResult("declined")


@FAMILY.command(
    "mesh.offer",
    '{"kind": "strategy|thinking_method|model_address", "name": "…"}  (offer one of mine '
    "to my peers, signed; a model goes as its address, never its key)",
    args=OfferArgs,
    effect="external",
    unavailable=mesh_off,
)
def offer(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        container = ctx.managers.exchange.offer(str(arg(cmd, "kind")), str(arg(cmd, "name")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.offer", exc) from None
    return CommandResult(_queued(container))


@FAMILY.command(
    "mesh.offers",
    '{"limit": 20}  (strategies, thinking methods and model addresses peers offered: unused until my owner approves)',
    args=ListArgs,
    effect="read",
)
def offers(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.exchange.offers(limit=int(arg(cmd, "limit", default=20)))
    return CommandResult("\n".join(_pending_line(r) for r in rows) or "no peer offered anything yet", show=True)


@FAMILY.command(
    "mesh.offer_accept",
    '{"container": "sha256:…"}  (take a peer\'s strategy, method or model; my owner decides)',
    args=ContainerArgs,
    effect="modify_self",
    owner_only="taking what a peer offered into my own ways of thinking",
)
def offer_accept(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        became = ctx.managers.exchange.accept_offer(str(arg(cmd, "container")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.offer_accept", exc) from None
    return CommandResult(f"taken: {became}")


@FAMILY.command(
    "mesh.offer_decline",
    '{"container": "sha256:…"}  (set a peer\'s offer aside)',
    args=ContainerArgs,
    effect="write_self",
)
def offer_decline(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        ctx.managers.exchange.decline_offer(str(arg(cmd, "container")))
    except (NotFound, Refused) as exc:
        raise _exchange_error("mesh.offer_decline", exc) from None
    return CommandResult("declined")
