"""What a hostile peer publishes at a persona's mesh door, as data: a new shape is one line. Used by the unit tests
(tests/unit/test_mesh_door_input.py, over the in-memory transport) and by the real py-libp2p ones
(tests/integration/test_mesh_holes.py, from the attacker's own node). Every shape must leave the door up, cost the
persona nothing and give the attacker nothing."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from reach.hmp.containers import canonical, encode, seal
from reach.hmp.identity import Identity

SYNC, ALL = "anima/sync", "anima/all"
DEEP = 30_000  # a 60 KB array nested this deep: Python's json parser recurses once per level

# bytes published on anima/sync (have / want / bodies) and on anima/all (containers)
RAW: dict[str, bytes] = {
    "an empty list": b"[]",
    "a bare string": b'"have"',
    "null": b"null",
    "a number": b"42",
    "an empty object": b"{}",
    "not JSON": b"have want bodies",
    "not UTF-8": b"\xff\xfe\xfa{}",
    "NaN": b'{"kind": "have", "ts": NaN}',
    "a 60 KB array nested 30,000 deep": b"[" * DEEP + b"]" * DEEP,
    "an object nested 20,000 deep": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    "a 5,000-digit integer": b'{"kind": "have", "ts": ' + b"9" * 5000 + b"}",
    "a megabyte of spaces": b" " * (1024 * 1024) + b"{}",
    "a kind that is a list": b'{"kind": ["have"]}',
}

# sync messages of the right kind with fields of the wrong type (`{victim}` is the persona's DID)
SYNC_MESSAGES: dict[str, dict[str, Any]] = {
    "a have without a signature": {"kind": "have", "ids": []},
    "a have whose ids are objects": {"kind": "have", "did": "x", "peer": "y", "ts": 0, "sig": "00", "ids": [{}]},
    "a have whose ids is a string": {"kind": "have", "did": "x", "peer": "y", "ts": 0, "sig": "00", "ids": "abc"},
    "a have whose ts is a string": {"kind": "have", "did": "x", "peer": "y", "ts": "0", "sig": "00", "ids": []},
    "a have with 100,000 ids": {
        "kind": "have",
        "did": "x",
        "peer": "y",
        "ts": 0,
        "sig": "00",
        "ids": ["sha256:" + "0" * 64] * 100_000,
    },
    "a want without from": {"kind": "want", "to": "{victim}", "ids": []},
    "a want whose ids is an object": {"kind": "want", "to": "{victim}", "from": "{mallory}", "ids": {"a": 1}},
    "a want whose to is a list": {"kind": "want", "to": ["{victim}"], "from": "{mallory}", "ids": []},
    "bodies whose containers is a string": {"kind": "bodies", "to": "{victim}", "containers": "x"},
    "bodies holding a list": {"kind": "bodies", "to": "{victim}", "containers": [[1, 2]]},
    "bodies holding a forged container": {
        "kind": "bodies",
        "to": "{victim}",
        "containers": [{"id": "sha256:" + "1" * 64, "sig": "x"}],
    },
}

# validly signed containers (mallory's key) whose envelope has a field of the wrong type: (type, fields changed)
SIGNED_ENVELOPES: dict[str, tuple[str, dict[str, Any]]] = {
    "topic is a list": ("cogsync", {"topic": ["tides"]}),
    "topic is an object": ("cogsync", {"topic": {"tag": "tides"}}),
    "recipient is a list": ("message", {"recipient": ["{victim}"]}),
    "recipient is an object": ("message", {"recipient": {"did": "{victim}"}}),
    "recipient is not a DID": ("message", {"recipient": "bob"}),
    "lineage holds numbers": ("answer", {"lineage": [1, 2]}),
    "lineage is a string": ("answer", {"lineage": "sha256:abc"}),
    "payload is a list": ("message", {"payload": ["hello"]}),
    "ts is a string": ("message", {"ts": "1700000000000"}),
    "ts is true": ("message", {"ts": True}),
    "ttl is a float": ("message", {"ttl": 3600.5}),
    "v is a string": ("message", {"v": "1"}),
    "type is a list": ("message", {"type": ["message"]}),
    "nonce is an object": ("message", {"nonce": {"n": 1}}),
    "an unsigned extra field": ("message", {"extra": "not signed by anyone"}),
}

# validly signed containers whose payload is not of its type's shape: (type, payload, fields)
SIGNED_PAYLOADS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "CogSync tags is 5": ("cogsync", {"kind": "diary", "text": "x", "tags": 5}, {"topic": "tides"}),
    "CogSync tags hold objects": ("cogsync", {"kind": "diary", "text": "x", "tags": [{"a": 1}]}, {"topic": "tides"}),
    "CogSync kind is unknown": ("cogsync", {"kind": "script", "text": "rm -rf /"}, {"topic": "tides"}),
    "CogSync text is a number": ("cogsync", {"kind": "diary", "text": 5}, {"topic": "tides"}),
    "a message without text": ("message", {"n": 1}, {}),
    "a message whose text is a list": ("message", {"text": ["obey", "mallory"]}, {}),
    "an evaluation scoring 5": ("evaluation", {"subject": "{victim}", "score": 5}, {}),
    "an evaluation scoring a string": ("evaluation", {"subject": "{victim}", "score": "1"}, {}),
    "an evaluation of no DID": ("evaluation", {"subject": ["x"], "score": 1.0}, {}),
    "a vote for a list": ("vote", {"case": "sha256:" + "2" * 64, "solution": ["a"]}, {}),
    "a vote scoring true": ("vote", {"case": "sha256:" + "2" * 64, "score": True}, {}),
    "a solution of no case": ("solution", {"case": 7, "text": "x"}, {}),
    "a rotation with a bad signature": ("rotation", {"old": "{mallory}", "new": "{mallory}", "new_sig": "zz"}, {}),
    "an envelope whose hops is a string": ("note", {"note": {}, "hops": "1"}, {"recipient": "{victim}"}),
    "a hello whose topics is a string": ("hello", {"topics": "tides"}, {}),
}


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, did in names.items():
            value = value.replace("{" + key + "}", did)
        return value
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def signed(identity: Identity, container: dict[str, Any]) -> dict[str, Any]:
    """`container` re-hashed and re-signed by `identity` after its fields were changed (what its own key can do)."""
    body = {k: v for k, v in container.items() if k not in ("id", "sig")}
    encoded = canonical(body)
    return {
        **body,
        "id": "sha256:" + hashlib.sha256(encoded).hexdigest(),
        "sig": base64.urlsafe_b64encode(identity.sign(encoded)).rstrip(b"=").decode(),
    }


def shapes(mallory: Identity, victim: str) -> list[tuple[str, str, bytes]]:
    """(name, channel, bytes) of every shape above, for `victim` (the persona's DID)."""
    names = {"victim": victim, "mallory": mallory.did}
    out: list[tuple[str, str, bytes]] = []
    for name, data in RAW.items():
        out += [(f"sync: {name}", SYNC, data), (f"container: {name}", ALL, data)]
    for name, message in SYNC_MESSAGES.items():
        out.append((f"sync: {name}", SYNC, json.dumps(_fill(message, names)).encode()))
    for name, (type_, fields) in SIGNED_ENVELOPES.items():
        base = seal(mallory, type_, {"text": "x", "kind": "diary"}, topic="tides" if type_ == "cogsync" else None)
        container = signed(mallory, {**base, **_fill(fields, names)})
        out.append((f"signed: {name}", ALL, json.dumps(container).encode()))
    for name, (type_, payload, fields) in SIGNED_PAYLOADS.items():
        base = seal(mallory, type_, {})
        container = signed(mallory, {**base, "payload": _fill(payload, names), **_fill(fields, names)})
        out.append((f"signed: {name}", ALL, encode(container)))
    return out


__all__ = ["ALL", "RAW", "SIGNED_ENVELOPES", "SIGNED_PAYLOADS", "SYNC", "SYNC_MESSAGES", "shapes", "signed"]
