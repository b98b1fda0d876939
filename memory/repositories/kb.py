"""The knowledge base: documents the human gave, whose chunks are retrievable items of tier `kb`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from memory.models import KBDocument
from memory.repositories.tiered import TierRepo


class KnowledgeBaseRepo(TierRepo):
    def by_hash(self, sha256: str) -> KBDocument | None:
        return self.session.scalars(select(KBDocument).where(KBDocument.sha256 == sha256)).first()

    def add(
        self,
        path: str,
        title: str,
        sha256: str,
        pieces: Sequence[str],
        *,
        source: str = "",
        author: str = "",
        tags: Sequence[str] = (),
    ) -> KBDocument:
        """`source`: who gave the document and how, when not the owner (`Ann (guest, via matrix)`), kept with it
        and in each chunk's metadata; `author`: their name, each chunk's author (a search shows it)."""
        doc = KBDocument(
            path=path, title=title, sha256=sha256, chunks=len(pieces), chars=sum(map(len, pieces)), source=source[:300]
        )
        meta = {"path": path, "from": source} if source else {"path": path}
        self.session.add(doc)
        self.session.flush()
        for number, piece in enumerate(pieces):
            self.items.put(
                "kb",
                f"{doc.id}:{number}",
                piece,
                title=title,
                episode=f"kb:{doc.id}",
                seq=number,
                importance=0.5,
                meta=meta,
                author=author[:200],
                tags=tags,
            )
        return doc

    def list(self) -> list[KBDocument]:
        return list(self.session.scalars(select(KBDocument).order_by(KBDocument.id)).all())

    def get(self, doc_id: int) -> KBDocument:
        return self._get(KBDocument, doc_id)

    def set_status(self, doc_id: int, status: str) -> bool:
        """Archive (`archived`) or restore (`active`) a document: its chunks leave or rejoin retrieval."""
        doc = self.get(doc_id)
        ids = self.items.ids_of("kb", [f"{doc.id}:{number}" for number in range(doc.chunks)])
        return self.items.set_status(ids, status) > 0

    def remove(self, doc_id: int) -> KBDocument:
        doc = self._get(KBDocument, doc_id)
        for number in range(doc.chunks):
            self.items.remove("kb", f"{doc.id}:{number}")
        self.session.delete(doc)
        self.session.flush()  # its checksum is free again for the text that replaces it
        return doc
