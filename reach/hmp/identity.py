"""A persona's mesh identity: an Ed25519 key pair (`cryptography`) and its DID, `did:key:z…` (the multicodec
ed25519-pub prefix 0xed 0x01 before the 32-byte public key, base58btc, multibase prefix `z`).

The private key lives in one file with owner-only permissions (0600) in the data dir — never in the database, a
log, a page or an export. Rotation: a new key is made, and a rotation statement naming the new DID is signed by
the old key AND the new one (each vouches for the other); the old DID is then retired. Revocation: a statement
signed by the key itself (or by its successor) saying it must no longer be trusted."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import base58
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519_PUB_MULTICODEC = b"\xed\x01"
DID_PREFIX = "did:key:z"
KEY_FILE_MODE = 0o600


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
        decoded = base58.b58decode(did[len(DID_PREFIX):])
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

    # ---- on disk ------------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the private key (PKCS#8 PEM) with mode 0600, atomically (a temporary file created 0600, renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        pem = self.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())
        temporary = path.with_suffix(path.suffix + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_FILE_MODE)
        try:
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temporary, KEY_FILE_MODE)
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: Path) -> Identity:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise PermissionError(f"{path} is readable by others (mode {mode:o}); it must be 0600")
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path} does not hold an Ed25519 private key")
        return cls(key)

    @classmethod
    def load_or_create(cls, path: Path) -> Identity:
        if path.exists():
            return cls.load(path)
        identity = cls.generate()
        identity.save(path)
        return identity


__all__ = ["BadDid", "Identity", "did_of", "public_key_of", "verify"]
