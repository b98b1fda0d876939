"""A persona's mesh identity: an Ed25519 key pair (`cryptography`) and its DID, `did:key:z…` (the multicodec
ed25519-pub prefix 0xed 0x01 before the 32-byte public key, base58btc, multibase prefix `z`).

The private key is kept by a SecretStore (memory/secrets.py): a file with owner-only permissions (0600) in the data
dir, or — a fleet persona's — sealed (AES-256-GCM under the deployment's key) in its database; never in clear in the
database, nor in a log, a page or an export. Rotation: a new key is made, and a rotation statement naming the new DID is
signed by
the old key AND the new one (each vouches for the other); the old DID is then retired. Revocation: a statement
signed by the key itself (or by its successor) saying it must no longer be trusted."""

from __future__ import annotations

from dataclasses import dataclass

import base58
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519_PUB_MULTICODEC = b"\xed\x01"
DID_PREFIX = "did:key:z"


class BadDid(ValueError):
    """Not a did:key of an Ed25519 public key."""


def did_of(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return DID_PREFIX + base58.b58encode(ED25519_PUB_MULTICODEC + raw).decode("ascii")


def public_key_of(did: str) -> Ed25519PublicKey:
    """The public key a did:key names (BadDid when it names none)."""
    if not isinstance(did, str) or not did.startswith(DID_PREFIX):
        raise BadDid(f"not a did:key: {str(did)[:80]!r}")
    try:
        decoded = base58.b58decode(did[len(DID_PREFIX) :])
    except ValueError as exc:
        raise BadDid(f"not base58btc: {did[:80]!r}") from exc
    if len(decoded) != 34 or not decoded.startswith(ED25519_PUB_MULTICODEC):
        raise BadDid(f"not an Ed25519 did:key: {did[:80]!r}")
    return Ed25519PublicKey.from_public_bytes(decoded[2:])


def verify(did: str, signature: bytes, message: bytes) -> bool:
    """Whether `signature` is the DID's key's signature of `message` (False for a bad DID or signature)."""
    try:
        public_key_of(did).verify(signature, message)
    except (InvalidSignature, BadDid, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Identity:
    """A key pair in memory. `repr` never shows the private key."""

    private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> Identity:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public(self) -> Ed25519PublicKey:
        return self.private.public_key()

    @property
    def did(self) -> str:
        return did_of(self.public)

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)

    def __repr__(self) -> str:
        return f"Identity({self.did})"

    # ---- kept as a secret (memory/secrets.py: a 0600 file, or sealed in a fleet persona's database) --------------
    def to_pem(self) -> bytes:
        """The private key, PKCS#8 PEM — only ever handed to a SecretStore."""
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @classmethod
    def from_pem(cls, pem: bytes, where: str = "the secret") -> Identity:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{where} does not hold an Ed25519 private key")
        return cls(key)


__all__ = ["BadDid", "Identity", "did_of", "public_key_of", "verify"]
