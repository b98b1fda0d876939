"""HMP-style containers: signed, immutable, content-addressed.

A container is a JSON object:
    {"v": 1, "type": …, "sender": "did:key:…", "ts": <ms since the epoch>, "ttl": <seconds>, "nonce": …,
     "recipient": <did or null>, "topic": <str or null>, "lineage": [<container ids>], "payload": {…},
     "id": "sha256:<hex>", "sig": "<base64url>"}
The body is every field but `id` and `sig`; its canonical encoding is RFC 8785 (JSON Canonicalization Scheme, the
`rfc8785` package). `id` = sha256 of that encoding; `sig` = the sender's Ed25519 signature of the same bytes (so
changing one byte of the body changes the id and breaks the signature; nothing can be edited in place: a correction
is a new container whose lineage names the old one).

`check()` verifies what arrived, in order, and says why it refuses: oversized, malformed (not JSON, nested too deep,
a field of the wrong type: reach/hmp/wire.py, schema.py), forged (id or signature does not match), then — the sender
now proven (`Refused.verified`) — unknown_type, expired (or dated too far ahead) and a malformed payload (a field of
its type's payload model of the wrong type). A refusal whose sender is not proven must not be held against the DID it
names (that would let anyone frame a peer): the receiver holds it against the peer that delivered it. Replays, revoked
keys, blocklisted peers and
floods need the receiver's state; the manager checks those (managers/mesh.py)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785
from pydantic import ValidationError

from reach.hmp import wire
from reach.hmp.identity import BadDid, Identity, public_key_of, verify
from reach.hmp.schema import Envelope, Payload, first_error, parse_payload

VERSION = 1
MAX_BYTES = 64 * 1024  # a container on the wire; bigger ones are refused before parsing
MAX_TTL_SECONDS = 30 * 24 * 3600
CLOCK_SKEW_SECONDS = 120  # a container dated further ahead than this is refused as expired (not yet valid)
# what a container may be; anything else is refused as unknown_type
TYPES = frozenset(
    {
        "message",  # a note to one peer (recipient) or to all
        "note",  # a distributed note: its author's signed note ({text, mentions, hashtags, priority}), carried to one
        # friend (recipient) inside a friend's envelope ({note: <that container>, hops}) — managers/mesh.py
        "ask",
        "answer",  # a question to a peer and its answer (lineage: the ask)
        "cogsync",  # a diary entry, concept, link or abstract published under a topic (tag)
        "evaluation",  # a signed evaluation −1…+1 of a peer or of one container
        "ethics_case",
        "solution",
        "vote",  # ethics consensus: case → solutions → votes
        "claim",  # CogConsensus: a claim; evaluations of it are its votes
        "rotation",
        "revocation",  # key management
        "hello",  # a persona saying who it is on the mesh (its topics), sent when it first meets peers
        "goal",
        "goal_status",  # HMP GMP: a goal put to the peers, and what became of it at one (lineage: the goal)
        "strategy",
        "thinking_method",
        "model_address",  # offered to peers; the receiver's owner approves before use
    }
)
BODY_FIELDS = ("v", "type", "sender", "ts", "ttl", "nonce", "recipient", "topic", "lineage", "payload")


class Refused(Exception):
    """A container that was refused; `reason` is the counter it goes to."""

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        sender: str | None = None,
        container_id: str | None = None,
        verified: bool = False,
    ):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.sender = sender  # who the container claims sent it
        self.container_id = container_id
        self.verified = verified  # the signature held: `sender` really sent it (else it may be framed)


def canonical(body: Mapping[str, Any]) -> bytes:
    return rfc8785.dumps({k: body[k] for k in BODY_FIELDS})


def container_id(body: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(
    identity: Identity,
    type_: str,
    payload: Mapping[str, Any],
    *,
    ttl: int = 24 * 3600,
    lineage: Iterable[str] = (),
    recipient: str | None = None,
    topic: str | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """A new signed container from `identity`."""
    if type_ not in TYPES:
        raise ValueError(f"unknown container type {type_!r}")
    body: dict[str, Any] = {
        "v": VERSION,
        "type": type_,
        "sender": identity.did,
        "ts": int(time.time() * 1000) if now_ms is None else int(now_ms),
        "ttl": int(min(ttl, MAX_TTL_SECONDS)),
        "nonce": secrets.token_hex(8),
        "recipient": recipient,
        "topic": topic,
        "lineage": list(lineage),
        "payload": dict(payload),
    }
    encoded = canonical(body)
    return {**body, "id": "sha256:" + hashlib.sha256(encoded).hexdigest(), "sig": _b64(identity.sign(encoded))}


def encode(container: Mapping[str, Any]) -> bytes:
    """The wire form (canonical JSON of the whole container)."""
    return rfc8785.dumps(dict(container))


@dataclass(frozen=True)
class Checked:
    container: dict[str, Any]
    size: int
    payload: Payload  # the payload as its type's model (reach/hmp/schema.py)

    @property
    def id(self) -> str:
        return str(self.container["id"])

    @property
    def sender(self) -> str:
        return str(self.container["sender"])

    @property
    def type(self) -> str:
        return str(self.container["type"])

    @property
    def expires_ms(self) -> int:
        return int(self.container["ts"]) + int(self.container["ttl"]) * 1000


def check(raw: bytes | str, *, now_ms: int | None = None, max_bytes: int = MAX_BYTES) -> Checked:
    """The container, verified; `Refused(reason)` otherwise. Its size and nesting are bounded before it is parsed
    (reach/hmp/wire.py), every field's type before any is read (reach/hmp/schema.py)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    try:
        value = wire.read(data, max_bytes=max_bytes)
    except wire.WireError as exc:
        raise Refused(exc.reason, exc.detail) from None
    return check_value(value, len(data), now_ms=now_ms)


def check_value(container: Any, size: int, *, now_ms: int | None = None) -> Checked:
    """`check()` of a value already read within bounds (a container inside a sync message's `bodies`)."""
    if not isinstance(container, dict):
        raise Refused("malformed", f"a container is a JSON object, not {type(container).__name__}")
    sender, cid = container.get("sender"), container.get("id")
    claimed = sender[:120] if isinstance(sender, str) else None
    cid = cid[:80] if isinstance(cid, str) else None
    try:
        Envelope.model_validate(container)
    except ValidationError as exc:
        raise Refused("malformed", first_error(exc), sender=claimed, container_id=cid) from None
    try:
        public_key_of(str(sender))
    except BadDid as exc:
        raise Refused("forged", str(exc), sender=claimed, container_id=cid) from exc
    try:
        encoded = canonical(container)
    except (TypeError, ValueError, rfc8785.CanonicalizationError) as exc:  # floats out of range and the like
        raise Refused("malformed", f"not canonicalisable ({exc})"[:200], sender=claimed, container_id=cid) from exc
    if cid != "sha256:" + hashlib.sha256(encoded).hexdigest():
        raise Refused("forged", "id is not the hash of the body", sender=claimed, container_id=cid)
    try:
        signature = _unb64(container["sig"])
    except ValueError as exc:
        raise Refused("forged", "signature is not base64url", sender=claimed, container_id=cid) from exc
    if not verify(str(sender), signature, encoded):
        raise Refused("forged", "signature does not verify", sender=claimed, container_id=cid)
    # from here on the sender is proven: what is wrong is its own doing
    if container["type"] not in TYPES:
        raise Refused("unknown_type", str(container["type"])[:40], sender=claimed, container_id=cid, verified=True)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if container["ttl"] <= 0 or container["ttl"] > MAX_TTL_SECONDS or container["ts"] + container["ttl"] * 1000 < now:
        raise Refused(
            "expired", f"ts {container['ts']} ttl {container['ttl']}s", sender=claimed, container_id=cid, verified=True
        )
    if container["ts"] > now + CLOCK_SKEW_SECONDS * 1000:
        raise Refused("expired", "dated in the future", sender=claimed, container_id=cid, verified=True)
    try:
        payload = parse_payload(container["type"], container["payload"])
    except ValidationError as exc:
        raise Refused(
            "malformed", f"payload.{first_error(exc)}", sender=claimed, container_id=cid, verified=True
        ) from None
    return Checked(container, size, payload)


__all__ = [
    "MAX_BYTES",
    "TYPES",
    "Checked",
    "Refused",
    "canonical",
    "check",
    "check_value",
    "container_id",
    "encode",
    "seal",
]
