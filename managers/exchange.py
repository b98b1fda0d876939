"""What peers put to the persona beyond words, and what it puts to them (HMP: CogConsensus, GMP, the exchange of
strategies, thinking methods and model addresses). Every such container is signed and verified on arrival
(managers/mesh.py); here it becomes something the persona can see and answer:

- a peer's **consensus case** (an ethics case or a claim) reaches the persona as a note from that peer, through the
  conversation's one way in for a peer's words (`hear`): data, never an instruction. `cases` lists the open ones; the
  persona votes with `mesh.vote` (it leaves the persona: `external`, the consent gate), and only `mesh.adopt` changes
  the persona (its ethics.yaml: `modify_self`, the owner's approval);
- **goals** (HMP GMP): `publish_goal` puts one of the persona's own goals to its peers as a signed `goal`; a peer's
  `goal` reaches the persona as a note and waits, pending; `accept_goal` makes it one of the persona's goals — a
  change to what it strives for, so the command is `modify_self` and runs only once the owner approved it — and
  tells the publisher (`goal_status` accepted, addressed to it); `decline_goal` sets it aside;
- **offers**: a strategy, a thinking method or a model's address (never a key) a peer offers is stored pending and
  reaches the persona as a note; nothing of it is used until `accept_offer` — `modify_self`, the owner's approval —
  applies it: a strategy or a method becomes a row keeping its `origin`, a model address is added to the registry
  after the same health check as any model added at run time (managers/models.py `add`).

A pending goal or offer is its container's row, `accepted` (verified) with nothing local yet (`local_tier` None);
once accepted here `local_tier`/`local_id` say what it became; declined, its row is `rejected`. What a peer wrote is
kept as it came: a goal accepted from it is marked as written from a peer's words (memory/taint.py), so the goals block
fences it as data wherever it is shown."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from managers.conversation import Words
from managers.errors import NotFound, Refused
from memory.models import MeshContainer
from memory.note_kinds import Door
from reach.hmp.schema import OFFERS, GoalPayload, ModelAddressPayload, StrategyPayload, ThinkingMethodPayload

if TYPE_CHECKING:
    from managers import Managers

CASE_KINDS = ("ethics_case", "claim")
OFFER_KINDS = OFFERS  # strategy, thinking_method, model_address
QUOTED = 300  # characters of a peer's words quoted in the note that tells the persona of them
LISTED = 30  # rows a listing shows at most


@dataclass(frozen=True)
class Pending:
    """A peer's goal or offer as the persona is shown it."""

    id: str  # its container's id
    type: str  # goal | strategy | thinking_method | model_address
    sender: str  # the DID that signed it
    label: str  # the peer as the persona knows it (its name, its DID)
    payload: dict[str, Any]  # the peer's words: data
    state: str  # pending | accepted | declined
    became: str | None  # what it became here: "goal 12", "strategy 4", "llm peer-model"


def _quote(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= QUOTED else flat[: QUOTED - 1] + "…"


class ExchangeManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # ---- arrivals (managers/mesh.py `_apply` hands them here) ------------------------------------------------------
    def arrived(self, row: MeshContainer) -> str | None:
        """A verified container from a peer of a type this manager answers: what it became here (a note), or None
        when it is not for this persona (addressed to another)."""
        if row.recipient not in (None, self.house.mesh.my_did()):
            return None
        payload = dict(row.body.get("payload") or {})
        label = self.house.mesh.peer_label(row.sender)
        short = row.id[:19] + "…"
        if row.type in CASE_KINDS:
            what = "an ethics case" if row.type == "ethics_case" else "a claim to evaluate"
            how = (
                'mesh.vote {"case": "' + row.id + '", "solution": "sha256:…"} for one of its solutions'
                if row.type == "ethics_case"
                else 'mesh.vote {"case": "' + row.id + '", "score": -1…1}'
            )
            text = (
                f"Peer {label} put {what} to the mesh ({row.id}): “{_quote(payload.get('question', ''))}”. "
                f"mesh.cases lists the open cases with their solutions; {how}. My vote is my own."
            )
            return self._tell(row, text, "mesh:case")
        if row.type == "goal":
            text = (
                f"Peer {label} published a goal ({row.id}): “{_quote(payload.get('title', ''))}”"
                + (f" — {_quote(payload['description'])}" if payload.get("description") else "")
                + f'. mesh.goals lists peers\' goals; mesh.goal_accept {{"container": "{row.id}"}} would make it '
                "one of mine (my owner approves), mesh.goal_decline sets it aside."
            )
            return self._tell(row, text, "mesh:goal")
        if row.type == "goal_status":
            mine = self.repos.mesh.get(str(payload.get("goal", "")))
            if mine is None or mine.direction != "out" or mine.type != "goal":
                return "goal_status"  # about a goal not mine: kept for sync, nothing to tell
            title = (mine.body.get("payload") or {}).get("title", "")
            text = f"Peer {label} {payload.get('status')} my published goal “{_quote(title)}” ({mine.id[:19]}…)."
            return self._tell(row, text, "mesh:goal")
        if row.type in OFFER_KINDS:
            what = {
                "strategy": "a loop-breaking strategy",
                "thinking_method": "a thinking method",
                "model_address": "a model's address",
            }[row.type]
            gist = payload.get("instruction") or (
                f"{payload.get('model')} at {payload.get('base_url')}: {payload.get('notes', '')}"
            )
            text = (
                f"Peer {label} offers {what} ({short}) named {payload.get('name')!r}: “{_quote(gist)}”. It waits "
                f'unused: mesh.offers lists offers; mesh.offer_accept {{"container": "{row.id}"}} would '
                "take it (my owner approves first), mesh.offer_decline sets it aside."
            )
            return self._tell(row, text, "mesh:offer")
        return None

    def _tell(self, row: MeshContainer, text: str, tag: str) -> str:
        heard = self.house.conversation.hear(
            Words(text, door=Door.MESH, peer=row.sender, tags=[*self.house.mesh._note_tags(row), tag])
        )
        return f"note {heard.note_id}"

    # ---- consensus cases ---------------------------------------------------------------------------------------------
    def cases(self, limit: int = LISTED, *, unvoted: bool = False) -> builtins.list[dict[str, Any]]:
        """The cases and claims known here (mine and my peers'), newest first: who opened it, the question, its
        solutions, the trust-weighted tally, and my vote (None before I voted); `unvoted`: only those still waiting
        for my vote."""
        out = []
        me = self.house.mesh.my_did()
        for case in self.repos.mesh.cases(limit):
            tally = self.house.mesh.tally(case.id)
            rows = self.house.mesh.case_rows(case.id)
            mine = [r for r in rows if r.type == "vote" and r.direction == "out"]
            vote = dict(mine[-1].body.get("payload") or {}) if mine else None
            if unvoted and vote is not None:
                continue
            out.append(
                {
                    "id": case.id,
                    "kind": case.type,
                    "by": "me" if case.sender == me else self.house.mesh.peer_label(case.sender),
                    "question": tally.question,
                    "solutions": tally.solutions,
                    "votes": tally.votes,
                    "result": tally.result,
                    "score": tally.score,
                    "my_vote": vote,
                }
            )
        return out

    # ---- goals (GMP) -------------------------------------------------------------------------------------------------
    def publish_goal(self, goal_id: int) -> dict[str, Any]:
        """One of the persona's own goals, put to its peers as a signed `goal` container (queued in the outbox). A
        goal taken from a peer is not published again as the persona's own; one published and unchanged is not
        published twice."""
        goal = self.house.goals.get(int(goal_id))
        if goal.archived_at is not None or goal.status not in ("active", "paused"):
            raise Refused(
                f"goal {goal.id} is {goal.status if goal.archived_at is None else 'archived'}: only an open "
                "goal is published"
            )
        if self._taken_from_peer("goal", goal.id):
            raise Refused(f"goal {goal.id} came from a peer: it is theirs to publish")
        payload = GoalPayload(
            title=goal.title[:300],
            description=(goal.description or "")[:4000],
            horizon="long" if goal.horizon == "long" else "short",
            priority=max(0, min(10, int(goal.priority))),
            success_criteria=[str(c)[:300] for c in (goal.success_criteria or [])][:10],
            constraints=[str(c)[:300] for c in (goal.constraints or [])][:10],
            tags=[str(t)[:60] for t in (goal.tags or []) if not str(t).startswith(("peer:", "from:"))][:12],
            local=f"goal {goal.id}",
        ).model_dump()
        for row in self._mine("goal"):
            if dict(row.body.get("payload") or {}) == payload:
                raise Refused(f"goal {goal.id} is published already, unchanged ({row.id})")
        return self.house.mesh.compose("goal", payload)

    def peer_goals(self, limit: int = LISTED) -> builtins.list[Pending]:
        """The goals peers published, newest first, with what became of each here."""
        return [self._pending(r) for r in self._theirs(("goal",), limit)]

    def accept_goal(self, container_id: str) -> tuple[int, dict[str, Any]]:
        """A peer's published goal made one of the persona's goals (the command doing this is `modify_self`: it runs
        once the owner approved), marked as written from the peer's words; the publisher is told (`goal_status`
        accepted, addressed to it). Returns the goal's id and that container."""
        row = self._open(container_id, ("goal",))
        goal = GoalPayload.model_validate(row.body["payload"])
        created = self.house.goals.add(
            goal.title,
            description=goal.description,
            horizon=goal.horizon,
            priority=goal.priority,
            constraints=goal.constraints,
            success_criteria=goal.success_criteria,
            tags=[*goal.tags, "from:peer", f"peer:{row.sender}"],
        )
        self._taint("goal", created.id, row, goal.title)
        row.local_tier, row.local_id = "goal", created.id
        self.repos.session.flush()
        status = self.house.mesh.compose(
            "goal_status", {"goal": row.id, "status": "accepted"}, recipient=row.sender, lineage=[row.id], ref=row.id
        )
        return created.id, status

    def decline_goal(self, container_id: str) -> MeshContainer:
        """Set a peer's goal aside (nothing is sent: the publisher hears nothing of it)."""
        row = self._open(container_id, ("goal",))
        row.status = "rejected"
        return row

    # ---- offers: strategies, thinking methods, model addresses -------------------------------------------------------
    def offer(self, kind: str, name: str) -> dict[str, Any]:
        """One of the persona's own strategies, thinking methods or models (by name or id), offered to its peers as a
        signed container. A model goes as its OpenAI-compatible server's address and model name — never its key;
        the embedded model has no address to offer. What a peer offered and the owner accepted is not offered on."""
        if kind == "strategy":
            strategy = self.house.strategies.find_strategy(name)
            if strategy.origin:
                raise Refused(f"strategy {strategy.name!r} came from a peer: it is theirs to offer")
            if len((strategy.instruction or "").strip()) < 8:
                raise Refused(f"strategy {strategy.name!r} is built in: it has no instruction to offer")
            payload = StrategyPayload(
                name=_slug(strategy.name),
                instruction=strategy.instruction[:600],
                mechanism_class=strategy.mechanism_class,  # type: ignore[arg-type]
                cost=max(1, min(5, int(strategy.cost))),
            ).model_dump()
        elif kind == "thinking_method":
            method = self.house.strategies.find_method(name)
            if method.origin:
                raise Refused(f"thinking method {method.name!r} came from a peer: it is theirs to offer")
            payload = ThinkingMethodPayload(name=_slug(method.name), instruction=method.instruction[:600]).model_dump()
        elif kind == "model_address":
            entry = next((e for e in self.repos.llm_registry.all() if e.id == name), None)
            if entry is None:
                raise NotFound(f"no model {name!r} (llm_registry.list shows them)")
            base_url = str((entry.config or {}).get("base_url") or "")
            if entry.provider != "openai" or not base_url:
                raise Refused(f"model {name!r} has no server address to offer (only an OpenAI-compatible server's)")
            if (entry.config or {}).get("from_peer"):
                raise Refused(f"model {name!r} came from a peer: it is theirs to offer")
            payload = ModelAddressPayload(
                name=entry.id[:60], base_url=base_url, model=entry.model[:200], notes=(entry.description or "")[:1000]
            ).model_dump()
        else:
            raise Refused(f"an offer is one of {', '.join(OFFER_KINDS)}, not {kind!r}")
        return self.house.mesh.compose(kind, payload)

    def offers(self, limit: int = LISTED) -> builtins.list[Pending]:
        """What peers offered, newest first, with what became of each here."""
        return [self._pending(r) for r in self._theirs(OFFER_KINDS, limit)]

    def accept_offer(self, container_id: str) -> str:
        """Take a peer's offer (the command doing this is `modify_self`: it runs once the owner approved): a strategy
        or a thinking method becomes a row of the persona's keeping where it came from (`origin`); a model address is
        added to the registry after its health check. What it became, as a line."""
        row = self._open(container_id, OFFER_KINDS)
        origin = {"peer": row.sender, "container": row.id}
        payload = row.body["payload"]
        if row.type == "strategy":
            strategy = StrategyPayload.model_validate(payload)
            created = self.house.strategies.add_strategy(
                name=self._free_name(strategy.name, "strategy", row),
                instruction=strategy.instruction,
                mechanism_class=strategy.mechanism_class,
                cost=strategy.cost,
            )
            created.origin = {**origin, "name": strategy.name}
            row.local_tier, row.local_id = "strategy", created.id
            became = f"strategy {created.name}"
        elif row.type == "thinking_method":
            method = ThinkingMethodPayload.model_validate(payload)
            made = self.house.strategies.add_method(
                name=self._free_name(method.name, "thinking_method", row), instruction=method.instruction
            )
            made.origin = {**origin, "name": method.name}
            row.local_tier, row.local_id = "thinking_method", made.id
            became = f"thinking method {made.name}"
        else:
            address = ModelAddressPayload.model_validate(payload)
            from managers.models import RegistryError, ServerCheckFailed

            try:
                added = self.house.models.add(
                    address.base_url, address.model, name=self._free_name(address.name, "model_address", row)
                )
            except (RegistryError, ServerCheckFailed) as exc:
                raise Refused(f"the model at {address.base_url} was not added: {exc}") from None
            whence = {"from_peer": row.sender, "container": row.id}  # kept where every process reads it again
            entry = next(e for e in self.repos.llm_registry.all() if e.id == added["id"])
            entry.config = {**(entry.config or {}), **whence}
            kept = dict(self.repos.config.added_llms()[added["id"]])
            self.repos.config.set_added_llm(added["id"], {**kept, "config": {**kept.get("config", {}), **whence}})
            row.local_tier, row.local_id = "llm", None
            became = f"model {added['id']}"
        self.repos.session.flush()
        return became

    def decline_offer(self, container_id: str) -> MeshContainer:
        row = self._open(container_id, OFFER_KINDS)
        row.status = "rejected"
        return row

    # ---- helpers -----------------------------------------------------------------------------------------------------
    def _theirs(self, types: tuple[str, ...], limit: int) -> builtins.list[MeshContainer]:
        return self.repos.mesh.from_peers(types, self.house.mesh.my_did(), limit)

    def _mine(self, type_: str) -> builtins.list[MeshContainer]:
        return self.repos.mesh.sent_of_type(type_)

    def _open(self, container_id: str, types: tuple[str, ...]) -> MeshContainer:
        row = self.repos.mesh.get(container_id)
        if row is None or row.direction != "in" or row.type not in types:
            raise NotFound(
                f"no {' or '.join(types)} from a peer with id {container_id} "
                f"({'mesh.goals' if 'goal' in types else 'mesh.offers'} lists them)"
            )
        if row.status == "rejected":
            raise Refused(f"{row.id[:19]}… was declined")
        if row.local_tier is not None:
            raise Refused(f"{row.id[:19]}… was taken already ({row.local_tier} {row.local_id or ''})".rstrip())
        return row

    def _pending(self, row: MeshContainer) -> Pending:
        state = "declined" if row.status == "rejected" else "accepted" if row.local_tier else "pending"
        became = None
        if row.local_tier == "llm":
            became = next(
                (f"llm {e.id}" for e in self.repos.llm_registry.all() if (e.config or {}).get("container") == row.id),
                "llm",
            )
        elif row.local_tier:
            became = f"{row.local_tier} {row.local_id}"
        return Pending(
            row.id,
            row.type,
            row.sender,
            self.house.mesh.peer_label(row.sender),
            dict(row.body.get("payload") or {}),
            state,
            became,
        )

    def _free_name(self, name: str, kind: str, row: MeshContainer) -> str:
        """The offered name, or — when one of the persona's is named so — the name and the peer's DID tail."""
        if kind == "strategy":
            taken = {s.name for s in self.house.strategies.strategies(include_archived=True)}
        elif kind == "thinking_method":
            taken = {m.name for m in self.house.strategies.methods(include_archived=True)}
        else:
            from managers.models import model_slug

            taken = {e.id for e in self.repos.llm_registry.all()}
            name = model_slug(name)
        if name not in taken:
            return name
        return f"{name}-{''.join(c for c in row.sender[-6:] if c.isalnum()).lower()}"[:64]

    def _taken_from_peer(self, tier: str, local_id: int) -> bool:
        return self.repos.mesh.became(tier, local_id) is not None

    def _taint(self, tier: str, local_id: int, row: MeshContainer, text: str) -> None:
        """The row is the peer's words: marked so (memory/taint.py), fenced as data wherever a prompt shows it."""
        label = self.house.mesh.peer_label(row.sender)
        flat = " ".join(text.split())[:160]
        self.repos.taints.mark(
            [(tier, str(local_id))],
            [{"origin": "peer", "ref": f"{row.type} {row.id[:19]}…", "excerpt": flat, "peer": label}],
            thread_id=None,
            tick=None,
            now=self.house.deps.clock(),
        )


def _slug(name: str) -> str:
    """A strategy's or a method's name as it travels (HMP's slug: lower case, digits, - and _)."""
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower()).strip("-_")[:64]
    return slug if len(slug) >= 2 else f"{slug or 'x'}-method"


__all__ = ["CASE_KINDS", "OFFER_KINDS", "ExchangeManager", "Pending"]
