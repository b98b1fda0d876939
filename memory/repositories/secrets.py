"""Sealed secrets' rows (memory/secrets.py seals and opens them; this only stores nonce and ciphertext)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from memory.models import SealedSecret
from memory.repositories.base import Repo


class SealedSecretRepo(Repo):
    def get(self, name: str) -> SealedSecret | None:
        return self.session.scalars(select(SealedSecret).where(SealedSecret.name == name)).first()

    def put(self, name: str, *, key_id: str, nonce: bytes, sealed: bytes, at: datetime) -> None:
        row = self.get(name)
        if row is None:
            self.session.add(SealedSecret(name=name, key_id=key_id, nonce=nonce, sealed=sealed, updated_at=at))
        else:
            row.key_id, row.nonce, row.sealed, row.updated_at = key_id, nonce, sealed, at
        self.session.flush()

    def delete(self, name: str) -> None:
        row = self.get(name)
        if row is not None:
            self.session.delete(row)
            self.session.flush()
