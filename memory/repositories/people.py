"""People (the persona's humans, their identities per channel, contact requests) and the channels' inbox, outbox
and cursors: all their SQL."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from memory.clock import utcnow
from memory.models import (
    ChannelCursor,
    ChannelInbox,
    ChannelOutbox,
    ContactRequest,
    PeopleGroup,
    PeopleGroupMember,
    Person,
    PersonIdentity,
)
from memory.repositories.base import Repo, matched, prepared, table_of


@prepared
def _owner_languages() -> Select[str | None]:
    """Core: the owners' languages, in `owners`' order."""
    c = table_of(Person).c
    return select(c.language).where(c.role == "owner").order_by(c.id)


class PeopleRepo(Repo):
    def add(
        self,
        name: str,
        *,
        role: str,
        added_by: str,
        preferred_channel: str | None = None,
        language: str | None = None,
        quiet_hours: str | None = None,
        about: str = "",
    ) -> Person:
        person = Person(
            name=name,
            role=role,
            added_by=added_by,
            preferred_channel=preferred_channel,
            language=language,
            quiet_hours=quiet_hours,
            about=about,
            created_at=utcnow(),
        )
        self.session.add(person)
        self.session.flush()
        return person

    def get(self, person_id: int) -> Person | None:
        return self.session.get(Person, person_id)

    def by_name(self, name: str) -> Person | None:
        return self.session.scalars(
            select(Person).where(func.lower(Person.name) == name.strip().lower()).order_by(Person.id).limit(1)
        ).first()

    def all(self) -> list[Person]:
        return list(self.session.scalars(select(Person).order_by(Person.id)))

    def owners(self) -> list[Person]:
        return list(self.session.scalars(select(Person).where(Person.role == "owner").order_by(Person.id)))

    def owner_languages(self) -> list[str | None]:
        """Each owner's language (None: not set), in `owners`' order: what the tick's language falls back to."""
        return list(self.core(_owner_languages()).scalars().all())

    def names(self, person_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """person id -> (name, role)."""
        ids = sorted({int(i) for i in person_ids})
        if not ids:
            return {}
        rows = self.session.execute(select(Person.id, Person.name, Person.role).where(Person.id.in_(ids)))
        return {row.id: (row.name, row.role) for row in rows}

    # groups (HMP `users_group`)
    def groups(self) -> list[PeopleGroup]:
        return list(self.session.scalars(select(PeopleGroup).order_by(PeopleGroup.name)))

    def group(self, name: str) -> PeopleGroup | None:
        return self.session.scalars(
            select(PeopleGroup).where(func.lower(PeopleGroup.name) == name.strip().lower()).limit(1)
        ).first()

    def add_group(self, name: str, description: str) -> PeopleGroup:
        group = PeopleGroup(name=name, description=description, created_at=utcnow())
        self.session.add(group)
        self.session.flush()
        return group

    def delete_group(self, group: PeopleGroup) -> None:
        self.session.execute(delete(PeopleGroupMember).where(PeopleGroupMember.group_id == group.id))
        self.session.delete(group)
        self.session.flush()

    def members(self, group_id: int) -> list[Person]:
        return list(
            self.session.scalars(
                select(Person)
                .join(PeopleGroupMember, PeopleGroupMember.person_id == Person.id)
                .where(PeopleGroupMember.group_id == group_id)
                .order_by(Person.id)
            )
        )

    def groups_of(self, person_ids: Iterable[int]) -> dict[int, list[str]]:
        """person id -> the names of their groups, sorted."""
        ids = sorted({int(i) for i in person_ids})
        found: dict[int, list[str]] = {i: [] for i in ids}
        if ids:
            rows = self.session.execute(
                select(PeopleGroupMember.person_id, PeopleGroup.name)
                .join(PeopleGroup, PeopleGroup.id == PeopleGroupMember.group_id)
                .where(PeopleGroupMember.person_id.in_(ids))
                .order_by(PeopleGroup.name)
            )
            for person_id, name in rows:
                found[person_id].append(name)
        return found

    def join(self, group_id: int, person_id: int) -> bool:
        """True when the person was not in the group yet."""
        if self.session.get(PeopleGroupMember, (group_id, person_id)) is not None:
            return False
        self.session.add(PeopleGroupMember(group_id=group_id, person_id=person_id))
        self.session.flush()
        return True

    def leave(self, group_id: int, person_id: int) -> bool:
        row = self.session.get(PeopleGroupMember, (group_id, person_id))
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def delete_person(self, person: Person) -> dict[str, Any]:
        """A person and everything that names them in the directory and the channels — identities, groups, contact
        requests, inbox rows (held texts among them), outbox rows — deleted; the ids of the notes the outbox carried
        (the persona's words to them) returned under "notes"."""
        pid = person.id
        outbox_notes = [
            n
            for n in self.session.scalars(select(ChannelOutbox.note_id).where(ChannelOutbox.person_id == pid)).all()
            if n is not None
        ]
        counts = {
            "identities": matched(self.session.execute(delete(PersonIdentity).where(PersonIdentity.person_id == pid))),
            "groups": matched(
                self.session.execute(delete(PeopleGroupMember).where(PeopleGroupMember.person_id == pid))
            ),
            "contact_requests": matched(
                self.session.execute(delete(ContactRequest).where(ContactRequest.person_id == pid))
            ),
            "inbox": matched(self.session.execute(delete(ChannelInbox).where(ChannelInbox.person_id == pid))),
            "outbox": matched(self.session.execute(delete(ChannelOutbox).where(ChannelOutbox.person_id == pid))),
        }
        self.session.delete(person)
        self.session.flush()
        return {**counts, "notes": outbox_notes}

    # identities
    def identities(self, person_id: int) -> list[PersonIdentity]:
        return list(
            self.session.scalars(
                select(PersonIdentity).where(PersonIdentity.person_id == person_id).order_by(PersonIdentity.id)
            )
        )

    def identity(self, channel: str, address: str) -> PersonIdentity | None:
        return self.session.scalars(
            select(PersonIdentity).where(PersonIdentity.channel == channel, PersonIdentity.address == address)
        ).first()

    def add_identity(
        self, person_id: int, channel: str, address: str, conversation: str | None = None
    ) -> PersonIdentity:
        row = PersonIdentity(person_id=person_id, channel=channel, address=address, conversation=conversation)
        self.session.add(row)
        self.session.flush()
        return row

    def last_identity(self, person_id: int) -> PersonIdentity | None:
        """Where the person last wrote from."""
        return self.session.scalars(
            select(PersonIdentity)
            .where(PersonIdentity.person_id == person_id, PersonIdentity.last_seen_at.is_not(None))
            .order_by(PersonIdentity.last_seen_at.desc())
            .limit(1)
        ).first()

    # contact requests
    def contact_request(self, request_id: int) -> ContactRequest | None:
        return self.session.get(ContactRequest, request_id)

    def contact_request_of(self, channel: str, address: str) -> ContactRequest | None:
        return self.session.scalars(
            select(ContactRequest).where(ContactRequest.channel == channel, ContactRequest.address == address)
        ).first()

    def add_contact_request(
        self, channel: str, address: str, sender_name: str, conversation: str | None, now: datetime
    ) -> ContactRequest:
        row = ContactRequest(
            channel=channel,
            address=address,
            sender_name=sender_name,
            conversation=conversation,
            created_at=now,
            messages=0,
        )
        self.session.add(row)
        self.session.flush()
        return row

    def pending_count(self, channel: str) -> int:
        return int(
            self.session.scalar(
                select(func.count(ContactRequest.id)).where(
                    ContactRequest.channel == channel, ContactRequest.status == "pending"
                )
            )
            or 0
        )

    def contact_requests(self, status: str | None = "pending") -> list[ContactRequest]:
        q = select(ContactRequest).order_by(ContactRequest.id)
        if status is not None:
            q = q.where(ContactRequest.status == status)
        return list(self.session.scalars(q))


class ChannelRepo(Repo):
    # inbox
    def seen(self, channel: str, platform_id: str) -> ChannelInbox | None:
        return self.session.scalars(
            select(ChannelInbox).where(ChannelInbox.channel == channel, ChannelInbox.platform_id == platform_id)
        ).first()

    def record_incoming(self, **values: Any) -> ChannelInbox | None:
        """The inbox row; None when (channel, platform_id) is there already (a repeat, also under a race)."""
        row = ChannelInbox(**values)
        try:
            with self.session.begin_nested():
                self.session.add(row)
                self.session.flush()
        except IntegrityError:
            return None
        return row

    def held(self, contact_request_id: int) -> list[ChannelInbox]:
        return list(
            self.session.scalars(
                select(ChannelInbox)
                .where(ChannelInbox.contact_request_id == contact_request_id, ChannelInbox.state == "held")
                .order_by(ChannelInbox.id)
            )
        )

    def held_count(self, channel: str, contact_request_id: int | None = None) -> int:
        """Messages held for contact requests on `channel` (of one request, when given)."""
        q = select(func.count(ChannelInbox.id)).where(ChannelInbox.channel == channel, ChannelInbox.state == "held")
        if contact_request_id is not None:
            q = q.where(ChannelInbox.contact_request_id == contact_request_id)
        return int(self.session.scalar(q) or 0)

    def dropped_count(self, channel: str, contact_request_id: int | None, *, over_cap: bool) -> int:
        """Messages dropped on `channel` for a request (None: from senders dropped before any request), those over
        a hold cap only when `over_cap`."""
        q = select(func.count(ChannelInbox.id)).where(ChannelInbox.channel == channel, ChannelInbox.state == "dropped")
        q = q.where(
            ChannelInbox.contact_request_id.is_(None)
            if contact_request_id is None
            else ChannelInbox.contact_request_id == contact_request_id
        )
        if over_cap:
            q = q.where(ChannelInbox.reason.like("over the cap of %"))
        return int(self.session.scalar(q) or 0)

    def dropped_over_caps(self) -> dict[int | None, tuple[int, int]]:
        """Per contact request (None: senders dropped before any request): (messages, senders) dropped over a hold
        cap, every channel."""
        rows = self.session.execute(
            select(
                ChannelInbox.contact_request_id,
                func.count(ChannelInbox.id),
                func.count(func.distinct(ChannelInbox.sender)),
            )
            .where(ChannelInbox.state == "dropped", ChannelInbox.reason.like("over the cap of %"))
            .group_by(ChannelInbox.contact_request_id)
        )
        return {row[0]: (int(row[1]), int(row[2])) for row in rows}

    def set_aside(self, limit: int = 20) -> list[ChannelInbox]:
        """The newest messages set aside (quarantined): what a channel could not read."""
        return list(
            self.session.scalars(
                select(ChannelInbox)
                .where(ChannelInbox.state == "quarantined")
                .order_by(ChannelInbox.id.desc())
                .limit(limit)
            )
        )

    def set_aside_count(self) -> int:
        return int(
            self.session.scalar(select(func.count(ChannelInbox.id)).where(ChannelInbox.state == "quarantined")) or 0
        )

    def reasons(self, contact_request_id: int) -> list[str]:
        """The reasons kept on a request's inbox rows, newest first."""
        return list(
            self.session.scalars(
                select(ChannelInbox.reason)
                .where(ChannelInbox.contact_request_id == contact_request_id)
                .order_by(ChannelInbox.id.desc())
            )
        )

    def recent_from(self, channel: str, sender: str, since: datetime) -> int:
        return int(
            self.session.scalar(
                select(func.count(ChannelInbox.id)).where(
                    ChannelInbox.channel == channel,
                    ChannelInbox.sender == sender,
                    ChannelInbox.state != "dropped",
                    ChannelInbox.received_at >= since,
                )
            )
            or 0
        )

    def inbox(self, limit: int = 50) -> list[ChannelInbox]:
        return list(self.session.scalars(select(ChannelInbox).order_by(ChannelInbox.id.desc()).limit(limit)))

    # outbox
    def enqueue(self, **values: Any) -> ChannelOutbox:
        row = ChannelOutbox(**values)
        self.session.add(row)
        self.session.flush()
        return row

    def outbox_row(self, row_id: int) -> ChannelOutbox | None:
        return self.session.get(ChannelOutbox, row_id)

    def by_key(self, key: str) -> ChannelOutbox | None:
        return self.session.scalars(select(ChannelOutbox).where(ChannelOutbox.idempotency_key == key)).first()

    def pending(self, channel: str, now: datetime, limit: int = 20) -> list[ChannelOutbox]:
        """What is due: queued or left `sending` by a killed process, not held past `now` (quiet hours)."""
        return list(
            self.session.scalars(
                select(ChannelOutbox)
                .where(
                    ChannelOutbox.channel == channel,
                    ChannelOutbox.state.in_(("queued", "sending")),
                    (ChannelOutbox.not_before.is_(None)) | (ChannelOutbox.not_before <= now),
                )
                .order_by(ChannelOutbox.id)
                .limit(limit)
            )
        )

    def depth(self, channel: str) -> int:
        return int(
            self.session.scalar(
                select(func.count(ChannelOutbox.id)).where(
                    ChannelOutbox.channel == channel, ChannelOutbox.state.in_(("queued", "sending"))
                )
            )
            or 0
        )

    def failed_count(self) -> int:
        """Messages a channel refused for good (the owner is told)."""
        return int(
            self.session.scalar(select(func.count(ChannelOutbox.id)).where(ChannelOutbox.state == "failed")) or 0
        )

    def outbox(self, limit: int = 50) -> list[ChannelOutbox]:
        return list(self.session.scalars(select(ChannelOutbox).order_by(ChannelOutbox.id.desc()).limit(limit)))

    def set_state(self, row_id: int, state: str, **values: Any) -> None:
        self.session.execute(update(ChannelOutbox).where(ChannelOutbox.id == row_id).values(state=state, **values))

    # cursors
    def cursor(self, channel: str) -> str | None:
        row = self.session.get(ChannelCursor, channel)
        return row.cursor if row is not None else None

    def _status_row(self, channel: str) -> ChannelCursor:
        row = self.session.get(ChannelCursor, channel)
        if row is None:
            row = ChannelCursor(channel=channel, cursor=None, state="stopped", updated_at=utcnow())
            self.session.add(row)
        return row

    def store_cursor(self, channel: str, cursor: str | None) -> None:
        row = self._status_row(channel)
        row.cursor, row.updated_at = cursor, utcnow()
        self.session.flush()

    def set_status(self, channel: str, state: str, *, error: str | None, retry_at: datetime | None) -> None:
        row = self._status_row(channel)
        row.state, row.last_error, row.retry_at, row.updated_at = state, error, retry_at, utcnow()
        self.session.flush()

    def statuses(self) -> list[ChannelCursor]:
        return list(self.session.scalars(select(ChannelCursor).order_by(ChannelCursor.channel)))
