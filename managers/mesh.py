"""The mesh's rules (issue 30): this persona's identity, the containers it sends (the outbox of Isolated Mode) and
accepts (verified, deduplicated, rate-limited, trust-weighted; every refusal counted and held against its sender),
CogSync (publish chosen memories by tag; what arrives is data from a peer, never an instruction), consensus (ethics
cases and CogConsensus claims, trust-weighted) and sync (have/want by container id: nothing lost, nothing applied
twice, because a container's id is the hash of its body and there is one row per id).

The door (mesh/) moves bytes and holds the per-peer token buckets; everything it decides, it asks here."""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from memory.models import MeshContainer, MeshRefusal
from memory.secrets import FileSecretStore, SealedSecretStore, SecretStore, deployment_key
from persona.settings import MeshSettings
from persona.yaml_lines import parse_yaml, read_text
from reach.hmp.containers import Checked, Refused, check, encode, seal
from reach.hmp.identity import Identity, verify
from reach.hmp.limits import TokenBuckets

if TYPE_CHECKING:
    from managers import Managers

KEY_DIR, KEY_NAME = "mesh", "identity.key"  # <data dir>/mesh/identity.key, or the sealed secret "identity.key"
REFUSAL_REASONS = ("forged", "replay", "expired", "oversized", "unknown_type", "malformed", "revoked", "flood",
                   "blocked", "distrusted")
PENALISED = frozenset({"forged", "replay", "expired", "oversized", "unknown_type", "malformed", "flood"})
PUBLISHABLE = ("diary", "concept", "abstract")
NOTE_TEXT = 8000  # a distributed note's text at most
NOTE_MARKS = 12  # mentions (and hashtags) a distributed note carries at most


@dataclass(frozen=True)
class Outcome:
    status: str  # accepted | refused
    reason: str = ""
    container_id: str | None = None
    sender: str | None = None
    applied: str | None = None  # what it became here: "diary 12", "evaluation", …


@dataclass(frozen=True)
class Tally:
    case_id: str
    kind: str  # ethics_case | claim
    question: str
    solutions: dict[str, str]  # solution container id -> text
    weights: dict[str, float]  # solution id (or "score") -> trust-weighted votes
    votes: int
    result: str | None  # the winning solution's text; a claim: "agree" / "disagree" / "undecided"
    score: float | None  # a claim's trust-weighted mean evaluation


def _marks(values: Any) -> builtins.list[str]:
    """A note's mentions or hashtags as they travel: words of at most 60 characters, at most NOTE_MARKS."""
    words = values if isinstance(values, (list, tuple)) else []
    return [str(w)[:60] for w in words if isinstance(w, str) and w.strip()][:NOTE_MARKS]


def _voter_weight(trust: float) -> float:
    """A vote's weight from its voter's trust: 0 at −1, 0.5 for an unknown peer, 1 at +1."""
    return (1.0 + trust) / 2.0


class MeshManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repo = house.repos.mesh
        self._identity: Identity | None = None

    @property
    def settings(self) -> MeshSettings:
        settings = self.house.deps.settings
        return settings.mesh if settings is not None else MeshSettings()

    # ---- identity ----------------------------------------------------------------------------------------------------
    def secret_store(self) -> SecretStore:
        """Where this persona's key is kept: a 0600 file in the data dir's mesh/ (`vault: file`), or sealed in
        its database under the deployment's key (`vault: sealed`, a fleet persona's: memory/secrets.py)."""
        settings = self.house.deps.settings_for("the mesh identity")
        if settings.vault == "sealed":
            key = deployment_key(settings.secrets_key.get_secret_value() if settings.secrets_key else None)
            return SealedSecretStore(self.house.repos.secrets, key, clock=self.house.deps.clock)
        return FileSecretStore(Path(settings.data_dir).expanduser() / KEY_DIR)

    def identity(self) -> Identity:
        if self._identity is None:
            store = self.secret_store()
            pem = store.get(KEY_NAME)
            if pem is None:
                self._identity = Identity.generate()
                store.put(KEY_NAME, self._identity.to_pem())
            else:
                self._identity = Identity.from_pem(pem, f"{KEY_NAME} in {store.where}")
        return self._identity

    def use_identity(self, identity: Identity) -> None:
        """A door (or a bench) that already holds the key pair."""
        self._identity = identity

    def my_did(self) -> str:
        return self.identity().did

    def rotate(self) -> dict[str, Any]:
        """A new key pair. The rotation container is signed by the old key and carries the new key's signature of the
        old DID (each vouches for the other); the new key replaces the old one in the secret store, the old DID is
        retired here, and the container waits in the outbox for the peers."""
        old = self.identity()
        new = Identity.generate()
        statement = {"old": old.did, "new": new.did,
                     "new_sig": new.sign(f"rotate:{old.did}".encode()).hex()}
        container = self._queue(seal(old, "rotation", statement, ttl=self.settings.default_ttl_s))
        self.secret_store().put(KEY_NAME, new.to_pem())
        self._identity = new
        self._retire(old.did, replaced_by=new.did, container_id=container["id"])
        return container

    def revoke(self) -> dict[str, Any]:
        """Revoke this persona's key (it leaked): a revocation signed by the key itself goes to the peers, and a new
        key pair replaces it (without the old one vouching for it: the peers meet a new DID)."""
        old = self.identity()
        container = self._queue(seal(old, "revocation", {"did": old.did}, ttl=self.settings.default_ttl_s))
        new = Identity.generate()
        self.secret_store().put(KEY_NAME, new.to_pem())
        self._identity = new
        self._retire(old.did, replaced_by=None, container_id=container["id"])
        return container

    def _retire(self, did: str, *, replaced_by: str | None, container_id: str | None) -> None:
        self.repo.revoke(did, replaced_by=replaced_by, container_id=container_id, at=self.house.deps.clock())

    def is_revoked(self, did: str) -> bool:
        return self.repo.revocation(did) is not None

    # ---- sending (the outbox) ---------------------------------------------------------------------------------------
    def compose(self, type_: str, payload: Mapping[str, Any], *, recipient: str | None = None,
                topic: str | None = None, lineage: Iterable[str] = (), ref: str | None = None,
                ttl: int | None = None) -> dict[str, Any]:
        """A signed container from this persona, queued in the outbox (the door sends it when a peer is reachable)."""
        container = seal(self.identity(), type_, payload, ttl=ttl or self.settings.default_ttl_s, lineage=lineage,
                         recipient=recipient, topic=topic)
        return self._queue(container, ref=ref)

    def _queue(self, container: dict[str, Any], *, ref: str | None = None) -> dict[str, Any]:
        payload = container["payload"]
        self.repo.add(MeshContainer(
            id=container["id"], direction="out", type=container["type"], sender=container["sender"],
            recipient=container["recipient"], topic=container["topic"],
            ref=ref or payload.get("case") or payload.get("about") or None, body=container, status="queued",
            created_at=self.house.deps.clock()))
        return container

    def outbox(self, limit: int = 200) -> builtins.list[dict[str, Any]]:
        return [dict(r.body) for r in self.repo.outbox(limit)]

    def mark_sent(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        return self.repo.mark_sent(ids, self.house.deps.clock()) if ids else 0

    # ---- receiving --------------------------------------------------------------------------------------------------
    def receive(self, raw: bytes | str, *, limiter: TokenBuckets | None = None, relay: str | None = None,
                now_ms: int | None = None) -> Outcome:
        """Verify a container that arrived and apply it, or refuse it (counted; the sender's trust lowered for what
        only its sender can cause — a replay is held against the peer that relayed it, `relay`, when known)."""
        settings = self.settings
        try:
            checked = check(raw, now_ms=now_ms, max_bytes=settings.max_container_bytes)
        except Refused as refused:  # an unproven sender is not blamed: the peer that delivered it is
            blamed = refused.sender if refused.verified else relay
            return self._refuse(refused.reason, refused.detail, refused.sender or relay, refused.container_id,
                                blamed=blamed)
        sender, cid = checked.sender, checked.id
        if sender == self.my_did():
            return Outcome("refused", "own", cid, sender)  # an echo of our own container: not counted
        reputation = self.house.reputation
        if reputation.is_blocked(sender):
            return self._refuse("blocked", "", sender, cid, blamed=None)
        if self.is_revoked(sender):  # whoever holds a revoked key: not its successor's fault
            return self._refuse("revoked", "the sender's key was revoked or rotated", sender, cid, blamed=None)
        if self.repo.get(cid) is not None:  # anyone can replay a peer's container: blame the relay
            return self._refuse("replay", "already have it", sender, cid, blamed=relay if relay != sender else None)
        if limiter is not None and not limiter.allow(sender):
            return self._refuse("flood", f"over {settings.rate_per_s}/s", sender, cid, blamed=sender)
        trust = reputation.trust(sender)
        if trust < settings.min_trust:
            return self._refuse("distrusted", f"trust {trust:.2f} < {settings.min_trust}", sender, cid, blamed=None)
        return self._accept(checked, trust)

    def _refuse(self, reason: str, detail: str, sender: str | None, container_id: str | None, *,
                blamed: str | None) -> Outcome:
        """Count the refusal (under the DID the container names) and lower the trust of `blamed` — the proven
        sender, or the peer that delivered what no signature proves."""
        self.repo.refuse(MeshRefusal(sender=sender, reason=reason, container_id=container_id, detail=detail[:300],
                                     at=self.house.deps.clock()))
        if blamed and reason in PENALISED:
            self.house.reputation.penalise(blamed, reason, about=container_id)
        return Outcome("refused", reason, container_id, sender)

    def _accept(self, checked: Checked, trust: float) -> Outcome:
        container = checked.container
        payload: dict[str, Any] = container["payload"]
        inner = payload.get("note") if checked.type == "note" else None  # a distributed note: its origin's id
        ref = inner.get("id") if isinstance(inner, dict) else payload.get("case") or payload.get("about")
        row = MeshContainer(id=checked.id, direction="in", type=checked.type, sender=checked.sender,
                            recipient=container["recipient"], topic=container["topic"],
                            ref=str(ref or "")[:80] or None,
                            body=container, status="accepted", trust=round(trust, 4),
                            created_at=self.house.deps.clock())
        self.repo.add(row)
        applied = self._apply(row, payload)
        return Outcome("accepted", "", checked.id, checked.sender, applied)

    def _apply(self, row: MeshContainer, payload: dict[str, Any]) -> str | None:
        """What an accepted container becomes here. Text from a peer is data: a note or a memory marked with its
        origin ("peer"), sender DID and trust — never a command."""
        kind = row.type
        if kind in ("message", "ask", "answer"):
            if row.recipient not in (None, self.my_did()):
                return None  # relayed to someone else
            note = self.house.repos.notes.add(str(payload.get("text", ""))[:8000], source="peer",
                                              tags=self._peer_tags(row), read=False)
            return f"note {note.id}"
        if kind == "note":
            return self._take_note(row, payload)
        if kind == "cogsync":
            if row.topic not in self.subscriptions():
                return None  # kept for sync and relaying, not learned
            return self._learn(row, payload)
        if kind == "evaluation":
            subject = str(payload.get("subject", ""))
            if subject:
                self.house.reputation.evaluate(subject, float(payload.get("score", 0.0)), evaluator=row.sender,
                                               about=payload.get("about"), reason=str(payload.get("reason", "")),
                                               container_id=row.id)
            return "evaluation"
        if kind == "rotation":
            new, signature = str(payload.get("new", "")), str(payload.get("new_sig", ""))
            try:
                vouched = verify(new, bytes.fromhex(signature), f"rotate:{row.sender}".encode())
            except ValueError:
                vouched = False
            self._retire(row.sender, replaced_by=new if vouched else None, container_id=row.id)
            if vouched:  # the successor inherits the trust the old key had earned here
                self.house.reputation.evaluate(new, self.house.reputation.trust(row.sender), reason="rotation",
                                               about=row.id)
            return "rotation"
        if kind == "revocation":
            self._retire(row.sender, replaced_by=None, container_id=row.id)
            return "revocation"
        return kind  # ethics_case, solution, vote, claim: read by tally()

    # ---- distributed notes (F2F) ---------------------------------------------------------------------------------
    def share_note(self, text: str, *, mentions: Iterable[str] = (), hashtags: Iterable[str] = (),
                   priority: int = 0) -> builtins.list[dict[str, Any]]:
        """A public note of this persona's, to each friend (managers/peers.py `friends`): the note sealed once by this
        persona — its signed origin, which every friend of a friend verifies and deduplicates by — inside an envelope
        addressed to each friend, hops 1. Only the words, mentions, hashtags and priority leave: never the local
        note's tags, llm id, hidden flag or author ids. ValueError when there is no friend to share with."""
        friends = [str(f.did) for f in self.house.peers.friends()]
        if not friends:
            raise ValueError("I have no friends to share notes with (a peer tagged \"friend\": agents.tag, with my "
                             "human's approval)")
        note = seal(self.identity(), "note", {
            "text": text[:NOTE_TEXT], "mentions": _marks(mentions), "hashtags": _marks(hashtags),
            "priority": max(-10, min(10, int(priority)))}, ttl=self.settings.default_ttl_s)
        return [self._envelope(note, 1, did) for did in friends]

    def _envelope(self, note: Mapping[str, Any], hops: int, friend: str) -> dict[str, Any]:
        return self.compose("note", {"note": dict(note), "hops": hops}, recipient=friend, lineage=[str(note["id"])],
                            ref=str(note["id"]))

    def _take_note(self, row: MeshContainer, payload: dict[str, Any]) -> str | None:
        """A friend's envelope addressed here: the note inside is verified like any container (its author's
        signature, its age), taken once — by its id, however many friends carry it and whichever way it loops —,
        marked with its origin and hops (data from a peer, source `peer`), and relayed to this persona's other
        friends while hops < `mesh.note_hops`. An envelope from a peer that is no friend here is not taken; a note
        whose author is blocked, revoked or distrusted here is neither taken nor relayed."""
        if row.recipient != self.my_did():
            return None  # carried to another friend: kept for sync, not taken
        friends = {str(f.did) for f in self.house.peers.friends()}
        raw, hops = payload.get("note"), payload.get("hops")
        if row.sender not in friends or not isinstance(raw, dict) or type(hops) is not int or hops < 1:
            return None
        try:
            note = check(encode(raw), max_bytes=self.settings.max_container_bytes)
        except (Refused, TypeError, ValueError):
            return None
        origin, body = note.sender, note.container["payload"]
        reputation = self.house.reputation
        if note.type != "note" or note.container["recipient"] is not None or origin == self.my_did() \
                or self.repo.note_applied(note.id) or reputation.is_blocked(origin) or self.is_revoked(origin) \
                or reputation.trust(origin) < self.settings.min_trust:
            return None
        text = str(body.get("text", ""))[:NOTE_TEXT]
        if not text.strip():
            return None
        marks = [f"#{t}" for t in _marks(body.get("hashtags"))] + [f"@{m}" for m in _marks(body.get("mentions"))]
        priority = body.get("priority")
        entry = self.house.repos.notes.add(
            text, source="peer", read=False, priority=max(-10, min(10, priority)) if type(priority) is int else 0,
            tags=[*self._peer_tags(row), f"origin:{origin}", f"hops:{hops}", *marks])
        row.local_tier, row.local_id = "note", entry.id
        self.house.repos.session.flush()
        if hops < self.settings.note_hops:
            for friend in sorted(friends - {row.sender, origin}):
                self._envelope(raw, hops + 1, friend)
        return f"note {entry.id}"

    def _peer_tags(self, row: MeshContainer) -> builtins.list[str]:
        return ["via:mesh", "from:peer", f"peer:{row.sender}"]

    def _learn(self, row: MeshContainer, payload: dict[str, Any]) -> str:
        what = str(payload.get("kind", "diary"))
        text = str(payload.get("text", ""))[:8000]
        tags = [str(t)[:60] for t in payload.get("tags", [])][:12]
        tags = sorted({*tags, *(self._peer_tags(row)), str(row.topic)})
        if what == "concept":
            name = str(payload.get("name") or text[:60])[:150]
            concept = self.house.repos.concepts.add(f"{name} (from {row.sender[-8:]}, {row.id[7:15]})",
                                                    description=text, tags=tags)
            tier, local_id = "concept", concept.id
        elif what == "abstract":
            abstract = self.house.repos.abstracts.add(str(payload.get("title") or text[:80])[:300], text, tags=tags)
            tier, local_id = "abstract", abstract.id
        else:
            entry = self.house.repos.diary.add(text, tags=tags)
            tier, local_id = "diary", entry.id
        item = self.house.repos.items.find(tier, local_id)
        if item is not None:
            item.meta = {**(item.meta or {}), "origin": "peer", "peer": row.sender, "trust": row.trust,
                         "container": row.id}
        row.local_tier, row.local_id = tier, local_id
        self.house.repos.session.flush()
        return f"{tier} {local_id}"

    # ---- CogSync ----------------------------------------------------------------------------------------------------
    def subscribe(self, topic: str) -> bool:
        return self.repo.subscribe(topic, self.house.deps.clock())

    def unsubscribe(self, topic: str) -> bool:
        return self.repo.unsubscribe(topic)

    def subscriptions(self) -> builtins.list[str]:
        return sorted({*self.repo.topics(), *self.settings.topics})

    def publish(self, tag: str, *, tier: str = "diary", limit: int = 10) -> builtins.list[dict[str, Any]]:
        """Queue this persona's own `tier` memories tagged `tag` (never what it learned from peers) as CogSync
        containers under the topic `tag`; one already published is not published again."""
        if tier not in PUBLISHABLE:
            raise ValueError(f"publishable tiers: {', '.join(PUBLISHABLE)}")
        already = {(r.body.get("payload") or {}).get("local") for r in self.repo.published(tag)}
        items: builtins.list[tuple[str, dict[str, Any]]] = []
        if tier == "diary":
            for entry in self.house.repos.diary.list(limit=limit, tag=tag):
                items.append((f"diary {entry.id}", {"kind": "diary", "text": entry.text, "tags": list(entry.tags)}))
        elif tier == "abstract":
            for abstract in self.house.abstracts.list(limit=limit, tags=[tag]):
                items.append((f"abstract {abstract.id}", {"kind": "abstract", "title": abstract.title,
                                                          "text": abstract.summary, "tags": list(abstract.tags or [])}))
        else:
            for concept in self.house.repos.concepts.list(limit=limit * 5):
                if tag not in (concept.tags or []):
                    continue
                items.append((f"concept {concept.id}",
                              {"kind": "concept", "name": concept.name, "text": concept.description or "",
                               "tags": [tag]}))
        out = []
        for local, payload in items:
            if local in already or "from:peer" in payload.get("tags", []):
                continue
            out.append(self.compose("cogsync", {**payload, "local": local}, topic=tag))
        return out

    def learned(self, limit: int = 50) -> builtins.list[MeshContainer]:
        """What arrived by CogSync and became memory here (newest first)."""
        return self.repo.learned(limit)

    def reject(self, container_id: str) -> bool:
        """The owner's no to what a peer taught: its memory is archived and the sender's trust lowered a little."""
        row = self.repo.get(container_id)
        if row is None or row.direction != "in" or row.status == "rejected":
            return False
        if row.local_tier and row.local_id is not None:
            self.house.repos.archive(row.local_tier, row.local_id, self.house.deps.clock())
        row.status = "rejected"
        self.house.reputation.evaluate(row.sender, -0.2, reason="the owner rejected what it taught", about=row.id)
        return True

    # ---- consensus --------------------------------------------------------------------------------------------------
    def open_case(self, question: str, solutions: Iterable[str] = (), *, kind: str = "ethics_case") -> dict[str, Any]:
        """An ethics case (solutions proposed with it or later) or a CogConsensus claim."""
        if kind not in ("ethics_case", "claim"):
            raise ValueError("kind: ethics_case or claim")
        case = self.compose(kind, {"question": question})
        for text in solutions:
            self.propose(case["id"], text)
        return case

    def propose(self, case_id: str, text: str) -> dict[str, Any]:
        return self.compose("solution", {"case": case_id, "text": text}, lineage=[case_id], ref=case_id)

    def vote(self, case_id: str, *, solution: str | None = None, score: float | None = None) -> dict[str, Any]:
        """A vote for one solution of an ethics case, or an evaluation −1…+1 of a claim."""
        payload: dict[str, Any] = {"case": case_id}
        if solution is not None:
            payload["solution"] = solution
        if score is not None:
            payload["score"] = max(-1.0, min(1.0, float(score)))
        return self.compose("vote", payload, lineage=[case_id], ref=case_id)

    def case_rows(self, case_id: str) -> builtins.list[MeshContainer]:
        """The case (or claim) and every container that refers to it."""
        return self.repo.of_case(case_id)

    def tally(self, case_id: str) -> Tally:
        """The trust-weighted result: each voter's last vote counts once, weighed by its trust (this persona's own
        vote by 1)."""
        rows = self.case_rows(case_id)
        case = next((r for r in rows if r.id == case_id), None)
        if case is None:
            raise KeyError(f"no case {case_id}")
        solutions = {r.id: str(r.body["payload"].get("text", "")) for r in rows if r.type == "solution"}
        last_vote: dict[str, MeshContainer] = {}
        for row in sorted((r for r in rows if r.type == "vote"), key=lambda r: r.body["ts"]):
            last_vote[row.sender] = row
        me = self.my_did()
        weights: dict[str, float] = defaultdict(float)
        scored = 0.0
        for voter, row in last_vote.items():
            weight = 1.0 if voter == me else _voter_weight(self.house.reputation.trust(voter))
            payload = row.body["payload"]
            if case.type == "claim" and isinstance(payload.get("score"), (int, float)):
                weights["score"] += weight
                scored += weight * float(payload["score"])
            elif payload.get("solution") in solutions:
                weights[str(payload["solution"])] += weight
        question = str(case.body["payload"].get("question", ""))
        if case.type == "claim":
            total = weights.get("score", 0.0)
            score = scored / total if total else None
            result = None if score is None else "agree" if score > 0.2 else "disagree" if score < -0.2 else "undecided"
            return Tally(case_id, case.type, question, solutions, dict(weights), len(last_vote), result,
                         None if score is None else round(score, 4))
        best = max(weights, key=lambda s: weights[s], default=None)
        return Tally(case_id, case.type, question, solutions, dict(weights), len(last_vote),
                     solutions.get(best) if best else None, None)

    def open_cases(self, limit: int = 20) -> builtins.list[Tally]:
        return [self.tally(c.id) for c in self.repo.cases(limit)]

    def adopt(self, case_id: str) -> str:
        """Write an ethics case's result into the persona's ethics.yaml as a principle (the command doing this is
        `modify_self`: it runs only with the owner's approval). The local ethics stay sovereign."""
        tally = self.tally(case_id)
        if tally.kind != "ethics_case" or not tally.result:
            raise ValueError("only a decided ethics case can be adopted")
        settings = self.house.deps.settings_for("adopting into ethics.yaml")
        if not settings.persona_dir:
            raise ValueError("no persona directory to write ethics.yaml in")
        path = Path(settings.persona_dir) / "ethics.yaml"
        data = parse_yaml(read_text(path), str(path)) if path.exists() else {}
        data = data if isinstance(data, dict) else {}
        principles = list(data.get("principles") or [])
        principle = f"{tally.result} (mesh consensus on: {tally.question})"
        if principle not in principles:
            principles.append(principle)
        data["principles"] = principles
        path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
        self.house.persona.record_edit("ethics.yaml", by="mesh consensus", now=self.house.deps.clock())
        return principle

    # ---- sync (have / want) -----------------------------------------------------------------------------------------
    def have(self, limit: int = 5000) -> builtins.list[str]:
        """The ids of the containers this persona holds that a peer may lack (its own, sent or queued, and what it
        accepted), newest first."""
        return self.repo.ids(limit)

    def want(self, ids: Iterable[str]) -> builtins.list[str]:
        """Of a peer's ids, those this persona lacks."""
        ids = list(dict.fromkeys(ids))
        have = self.repo.existing(ids)
        return [i for i in ids if i not in have]

    def bodies(self, ids: Iterable[str]) -> builtins.list[dict[str, Any]]:
        return [dict(r.body) for r in self.repo.many(list(ids)[:5000])]

    # ---- what the pages and status show ------------------------------------------------------------------------------
    def refused_counts(self, did: str | None = None) -> dict[str, int]:
        return self.repo.refused_counts(did)

    def refused_recent(self, limit: int = 20) -> builtins.list[MeshRefusal]:
        return self.repo.refused_recent(limit)

    def counts(self) -> dict[str, int]:
        return self.repo.counts()

    def status(self) -> dict[str, Any]:
        return {"did": self.my_did(), "containers": self.counts(), "refused": self.refused_counts(),
                "subscriptions": self.subscriptions(), "outbox": len(self.outbox())}


__all__ = ["REFUSAL_REASONS", "MeshManager", "Outcome", "Tally"]
