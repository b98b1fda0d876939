"""Where a persona's secrets (its mesh key) are kept: a `SecretStore`, by name.

- `FileSecretStore`: one file per secret in an owner-only directory (0700), each file 0600, written atomically (a
  temporary file created 0600, then renamed); a file others can read is refused. A persona on its own data dir
  (`vault: file`, the default).
- `SealedSecretStore`: a fleet persona's (`vault: sealed`). A deployment's workers run any persona on any
  machine and a persona's data dir there is per-machine scratch (graph/fleet/files.py), so a key kept in it would
  differ from worker to worker: the persona would have a new DID on every machine. The key therefore lives beside
  the persona's memory, in its own PostgreSQL schema (table `sealed_secrets`), sealed with AES-256-GCM (the
  `cryptography` package) under the deployment's key `ANIMA_SECRETS_KEY` (32 random bytes, base64; every worker has
  it in its environment, nothing stores it). The database holds a random nonce and the ciphertext, whose tag also
  covers the secret's name (a sealed value cannot be passed off under another name); a reader of the database
  alone learns nothing, and a worker with another key is refused (never given a fresh key in place of the sealed
  one: that would change the persona's identity). Chosen over a secrets directory per deployment because that
  needs a filesystem shared by every worker, which a deployment of workers over one PostgreSQL does not have.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory.repositories.secrets import SealedSecretRepo

FILE_MODE = 0o600
DIR_MODE = 0o700
KEY_VARIABLE = "ANIMA_SECRETS_KEY"


class SecretStoreError(RuntimeError):
    """A secret that cannot be read or written as asked (the message says why and what to do)."""


class SecretStore(Protocol):
    where: str  # for messages: where these secrets are

    def get(self, name: str) -> bytes | None: ...
    def put(self, name: str, value: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


class FileSecretStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.where = str(directory)

    def path(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise SecretStoreError(f"secret name {name!r}: a plain file name")
        return self.directory / name

    def get(self, name: str) -> bytes | None:
        path = self.path(name)
        if not path.exists():
            return None
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise SecretStoreError(f"{path} is readable by others (mode {mode:o}); it must be 0600")
        return path.read_bytes()

    def put(self, name: str, value: bytes) -> None:
        path = self.path(name)
        self.directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        os.chmod(self.directory, DIR_MODE)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.write(fd, value)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)


def deployment_key(value: str | None) -> bytes:
    """The 32-byte key from `ANIMA_SECRETS_KEY` (urlsafe or standard base64)."""
    if not value:
        raise SecretStoreError(
            f"{KEY_VARIABLE} is not set: a fleet persona's secrets are sealed with it (32 random "
            "bytes, base64: python -c 'import os, base64; print(base64.urlsafe_b64encode("
            "os.urandom(32)).decode())'), the same on every worker"
        )
    try:
        raw = base64.b64decode(
            value.strip().replace("-", "+").replace("_", "/") + "=" * (-len(value.strip()) % 4), validate=True
        )
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SecretStoreError(f"{KEY_VARIABLE}: not 32 bytes in base64 (it has {len(raw)})")
    return raw


class SealedSecretStore:
    def __init__(self, repo: SealedSecretRepo, key: bytes, *, clock: Callable[[], datetime]) -> None:
        self.repo, self.clock = repo, clock
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(b"anima-secrets-key:" + key).hexdigest()[:16]
        self.where = f"the database, sealed with {KEY_VARIABLE} (key id {self.key_id})"

    @staticmethod
    def _bound(name: str) -> bytes:
        return f"anima-sealed-secret:{name}".encode()

    def get(self, name: str) -> bytes | None:
        row = self.repo.get(name)
        if row is None:
            return None
        if row.key_id != self.key_id:
            raise SecretStoreError(
                f"secret {name!r} was sealed with another {KEY_VARIABLE} (key id {row.key_id}, "
                f"this worker has {self.key_id}): give this worker the deployment's key"
            )
        try:
            return self._aead.decrypt(row.nonce, row.sealed, self._bound(name))
        except InvalidTag:
            raise SecretStoreError(f"secret {name!r} does not open with {KEY_VARIABLE}: it was altered") from None

    def put(self, name: str, value: bytes) -> None:
        nonce = secrets.token_bytes(12)
        self.repo.put(
            name,
            key_id=self.key_id,
            nonce=nonce,
            sealed=self._aead.encrypt(nonce, value, self._bound(name)),
            at=self.clock(),
        )

    def delete(self, name: str) -> None:
        self.repo.delete(name)


__all__ = ["FileSecretStore", "KEY_VARIABLE", "SealedSecretStore", "SecretStore", "SecretStoreError", "deployment_key"]
