"""The memory tiers, declared once: what each is called, how its rows read as records, what a human's edit may change
(one typed edit model per editable tier) and what may be done to it (archive, restore, purge).

Every door shares these: the web page and /api/memory (through `managers.memory.MemoryManager`), the MCP server's
search, and the persona's own commands where they name a tier. A tier works in the unit of work it is given
(`Repos`: one transaction) and never commits; refusals are `TierError`s naming the field they are about, which each
door reports in its own medium (the web maps them to HTTP statuses).

`TIERS` holds one instance of each, by name; `tier_of(name)` finds one or raises `UnknownTier`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from i18n import N_
from memory.clock import as_utc
from memory.models import (
    Concept,
    ConceptLink,
    DiaryEntry,
    Entity,
    Episode,
    Goal,
    Insight,
    KBDocument,
    LLMMemory,
    MemoryBlockVersion,
    OpenQuestion,
    Task,
    UnverifiedFact,
)
from memory.repositories import MemoryLimitError, NotFound, Repos
from memory.repositories.concepts import ARCHIVED_LINK_STATUSES

MAX_LIST = 500  # the widest window a listing reads
MAX_REF = 2**63 - 1  # the largest id a database integer holds


# ---- refusals -------------------------------------------------------------------------------------------------


class TierError(ValueError):
    """A refused tier operation: a message for whoever asked, and the field it is about."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class UnknownTier(TierError):
    """No tier of that name."""


class RowNotFound(TierError, NotFound):
    """No row of the tier with that ref."""


class NotEditable(TierError):
    """The tier (or this row of it) is not edited, deleted, archived or restored that way."""


class Conflict(TierError):
    """The change contradicts what is there (a name in use, a replaced version edited, …)."""


class Invalid(TierError):
    """The given values are refused (validation, a size limit)."""


class TooLarge(Invalid):
    """An upload over its size limit."""


class Unsupported(Invalid):
    """An upload of a kind that is not read."""


# ---- what a tier shows ------------------------------------------------------------------------------------------


Moment = Annotated[datetime, AfterValidator(as_utc)]
Action = Literal["edit", "archive", "restore", "delete", "history"]
Status = Literal["active", "archived"]
FieldKind = Literal["text", "textarea", "int", "float", "bool", "list", "lines", "choice"]


class FieldInfo(BaseModel):
    """How a page edits one field of a tier."""

    name: str
    label: str
    kind: FieldKind
    choices: list[str] = Field(default_factory=list)
    optional: bool = Field(False, description="Left out of the edit when blank (a resolution, say).")


class MemoryRecord(BaseModel):
    """One row of a tier, as every door shows it."""

    tier: str
    ref: str
    title: str = ""
    text: str = ""
    status: Status = "active"
    at: Moment | None = Field(None, description="When it was written or last changed.")
    fields: dict[str, Any] = Field(default_factory=dict, description="The editable fields' current values.")
    details: dict[str, Any] = Field(default_factory=dict, description="What else is worth showing.")
    actions: list[Action] = Field(default_factory=list, description="What may be done to it now.")


def _field(
    name: str, kind: FieldKind = "text", label: str | None = None, choices: Iterable[str] = (), optional: bool = False
) -> FieldInfo:
    return FieldInfo(
        name=name,
        label=label or name.replace("_", " ").capitalize(),
        kind=kind,
        choices=list(choices),
        optional=optional,
    )


# ---- a human's edits: one model per editable tier ---------------------------------------------------------------

Tags = list[str]


class TierEdit(BaseModel):
    """Only the fields given change; an empty body changes nothing."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    def given(self) -> bool:
        return bool(self.model_fields_set)


class BlockEdit(TierEdit):
    """Core memory or the notepad: the whole text (what it replaces is kept as a version)."""

    content: str = Field(max_length=20000, description="The block's new text (within the block's own limit).")


class LLMMemoryEdit(TierEdit):
    title: str | None = Field(None, max_length=300)
    content: str | None = Field(None, min_length=1, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)


class DiaryEdit(TierEdit):
    text: str | None = Field(None, min_length=1, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)
    priority: int | None = Field(None, ge=0, le=10)
    pinned: bool | None = None


class ConceptEdit(TierEdit):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)
    weight: float | None = Field(None, ge=0, le=100)
    pinned: bool | None = None


class LinkEdit(TierEdit):
    relation: str | None = Field(None, min_length=1, max_length=100)
    weight: float | None = Field(None, ge=0, le=100)
    tags: Tags | None = Field(None, max_length=32)


GoalStatus = Literal["active", "paused", "completed", "failed"]
TaskStatus = Literal["open", "in_progress", "done", "failed", "cancelled", "frozen"]


class GoalEdit(TierEdit):
    title: str | None = Field(None, min_length=1, max_length=300)
    description: str | None = Field(None, max_length=20000)
    horizon: Literal["short", "long"] | None = None
    status: GoalStatus | None = None
    priority: int | None = Field(None, ge=0, le=10)
    tags: Tags | None = Field(None, max_length=32)
    related_values: Tags | None = Field(None, max_length=32)
    reason: str | None = Field(None, max_length=2000)


class TaskEdit(TierEdit):
    title: str | None = Field(None, min_length=1, max_length=300)
    description: str | None = Field(None, max_length=20000)
    status: TaskStatus | None = None
    priority: int | None = Field(None, ge=0, le=10)
    pinned: bool | None = None
    tags: Tags | None = Field(None, max_length=32)


class EpisodeEdit(TierEdit):
    summary: str | None = Field(None, min_length=1, max_length=20000)
    emotional_tone: str | None = Field(None, max_length=32)
    key_events: list[str] | None = Field(None, max_length=50)


class EntityEdit(TierEdit):
    name: str | None = Field(None, min_length=1, max_length=200)
    kind: str | None = Field(None, min_length=1, max_length=32)
    description: str | None = Field(None, max_length=20000)
    facts: list[str] | None = Field(None, max_length=200)
    aliases: list[str] | None = Field(None, max_length=50)


class InsightEdit(TierEdit):
    insight: str | None = Field(None, min_length=1, max_length=20000)
    strategy: str | None = Field(None, max_length=20000)
    log_entry: str | None = Field(None, max_length=20000)
    trigger_topic: str | None = Field(None, max_length=2000)


class FactEdit(TierEdit):
    claim: str | None = Field(None, min_length=1, max_length=20000)
    context: str | None = Field(None, max_length=20000)
    confidence: float | None = Field(None, ge=0, le=1)
    priority: int | None = Field(None, ge=0, le=10)
    status: Literal["verified", "rejected"] | None = Field(
        None, description="Resolve the fact (its fact-check task closes)."
    )
    resolution: str | None = Field(None, max_length=2000)


class QuestionEdit(TierEdit):
    topic: str | None = Field(None, min_length=1, max_length=2000)
    context: str | None = Field(None, max_length=20000)
    priority: float | None = Field(None, ge=0, le=1)
    resolution: str | None = Field(None, min_length=1, max_length=1000, description="Resolve the question with this.")


class NoEdit(TierEdit):
    """A tier that is not edited (archived or deleted only)."""


E = TypeVar("E", bound=TierEdit)


# ---- the tiers --------------------------------------------------------------------------------------------------


def ref_id(ref: str) -> int:
    """A row tier's ref as its id; RowNotFound when it is not one."""
    if not (str(ref).isascii() and str(ref).isdigit()) or int(ref) > MAX_REF:
        raise RowNotFound(f"no row {str(ref)[:40]!r}: this tier's refs are numbers", field="ref")
    return int(ref)


def _status(archived: bool) -> Status:
    return "archived" if archived else "active"


def _tags(values: Iterable[Any] | None) -> list[str]:
    return [str(v) for v in values or []]


class Tier(ABC, Generic[E]):
    """One tier of memory and what may be done to it. `item_tier`: its tier in the retrieval catalogue (None: not
    searchable). `edit_model` is None when the tier is not edited; `deletable` says whether `purge` works."""

    name: str
    label: str
    item_tier: str | None = None
    archivable: bool = True
    versioned: bool = False  # one text whose replaced versions are what "archived" lists (core, notepad)
    deletable: bool = True
    edit_model: type[E] | None = None
    fields: tuple[FieldInfo, ...] = ()
    model: ClassVar[type | None] = None  # the table `count` sizes

    @abstractmethod
    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]: ...

    @abstractmethod
    def one(self, repos: Repos, ref: str) -> MemoryRecord: ...

    def count(self, repos: Repos) -> int:
        """Rows of the tier, archived ones included."""
        assert self.model is not None
        return repos.history.table_sizes([self.model])[self.model]

    @property
    def editable(self) -> bool:
        return self.edit_model is not None

    @property
    def searchable(self) -> bool:
        return self.item_tier is not None

    @property
    def archived_label(self) -> str:
        return N_("replaced versions") if self.versioned else N_("archived")

    @property
    def uploads(self) -> bool:
        return self.name == "kb"

    def parse_edit(self, body: Mapping[str, Any]) -> E:
        """An edit's fields checked against the tier's model (Invalid naming the first wrong field)."""
        if self.edit_model is None:
            raise NotEditable(f"{self.label.lower()} is not edited here (archive or delete it)", field="tier")
        try:
            return self.edit_model.model_validate(dict(body))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or None
            message = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in exc.errors()[:5])
            raise Invalid(message, field=where) from exc

    def edit(self, repos: Repos, ref: str, edit: E, now: datetime) -> None:
        """Change the given fields of one row."""
        raise NotEditable(f"{self.label.lower()} is not edited here (archive or delete it)", field="tier")

    def purge(self, repos: Repos, ref: str) -> None:
        """Delete one row for good (a human's delete; the persona's own deletes archive)."""
        if not self.deletable:
            raise NotEditable(f"{self.label.lower()} is not deleted; edit it (empty clears it)", field="tier")
        self.one(repos, ref)
        self._purge(repos, ref)

    def _purge(self, repos: Repos, ref: str) -> None:
        raise NotEditable(f"{self.label.lower()} is not deleted; edit it (empty clears it)", field="tier")

    def archive(self, repos: Repos, ref: str, now: datetime) -> bool:
        """Set one row aside (out of the persona's lists and retrieval, restorable); True when something changed."""
        if not self.archivable:
            raise Conflict(f"{self.label.lower()} are not archived: edit or delete them", field="tier")
        self.one(repos, ref)
        return self._archive(repos, ref, now)

    def _archive(self, repos: Repos, ref: str, now: datetime) -> bool:
        return repos.archive(self.name, ref, now)

    def restore(self, repos: Repos, ref: str) -> bool:
        """Bring an archived row back (a replaced version, for a versioned tier); True when something changed."""
        if not self.archivable and not self.versioned:
            raise Conflict(f"{self.label.lower()} are not archived, so not restored", field="tier")
        self.one(repos, ref)
        try:
            return self._restore(repos, ref)
        except TierError:
            raise
        except ValueError as exc:
            raise Conflict(str(exc), field="ref") from exc

    def _restore(self, repos: Repos, ref: str) -> bool:
        return repos.restore(self.name, ref)

    def actions(self, record: MemoryRecord) -> MemoryRecord:
        """The record with what may be done to it now."""
        active, version = record.status == "active", self.versioned and record.ref != self.name
        can: dict[Action, bool] = {
            "edit": self.editable and active and not version,
            "archive": self.archivable and active,
            "restore": not active and (self.archivable or version),
            "delete": self.deletable,
            "history": not version,
        }
        return record.model_copy(update={"actions": [name for name, ok in can.items() if ok]})


# ---- core memory and the notepad ------------------------------------------------------------------------------


class BlockTier(Tier[BlockEdit]):
    """Core memory or the notepad: one text; its ref is its name, a replaced version's ref is the version's id."""

    archivable = False
    versioned = True
    deletable = False
    edit_model = BlockEdit
    fields = (_field("content", "textarea"),)

    def __init__(self, name: str, label: str) -> None:
        self.name, self.label = name, label

    def _record(self, repos: Repos) -> MemoryRecord:
        block = repos.blocks.get(self.name)
        return MemoryRecord(
            tier=self.name,
            ref=self.name,
            title=self.label,
            text=block.content,
            at=block.updated_at,
            fields={"content": block.content},
            details={"chars": len(block.content), "char_limit": block.char_limit},
        )

    def _version(self, v: MemoryBlockVersion) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(v.id),
            title="replaced version",
            text=v.content,
            status="archived",
            at=v.replaced_at,
            details={"restore": "puts this text back; the current one becomes a version"},
        )

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        if archived:
            return [self._version(v) for v in repos.blocks.versions(self.name, limit)]
        return [self._record(repos)]

    def one(self, repos: Repos, ref: str) -> MemoryRecord:
        if ref == self.name:
            return self._record(repos)
        found = [v for v in repos.blocks.versions(self.name, MAX_LIST) if str(v.id) == ref]
        if not found:
            raise RowNotFound(f"{self.label.lower()} has no version {ref!r} (its ref is {self.name!r})", field="ref")
        return self._version(found[0])

    def count(self, repos: Repos) -> int:
        return 1 + len(repos.blocks.versions(self.name, MAX_LIST))

    def edit(self, repos: Repos, ref: str, edit: BlockEdit, now: datetime) -> None:
        if ref != self.name:
            raise Conflict(f"a replaced version is not edited; restore it, or edit {self.name!r}", field="ref")
        if "content" in edit.model_fields_set:
            try:
                repos.blocks.write(self.name, edit.content)
            except MemoryLimitError as exc:
                raise Invalid(str(exc), field="content") from exc


# ---- the tiers whose rows say themselves whether they are archived ---------------------------------------------


class RowTier(Tier[E]):
    """A tier of rows found by id; `what` names one in a not-found message."""

    what: str = "row"

    @abstractmethod
    def _get(self, repos: Repos, row_id: int) -> Any: ...

    @abstractmethod
    def _record(self, repos: Repos, row: Any) -> MemoryRecord: ...

    def one(self, repos: Repos, ref: str) -> MemoryRecord:
        try:
            return self._record(repos, self._get(repos, ref_id(ref)))
        except RowNotFound:
            raise
        except NotFound as exc:
            raise RowNotFound(f"no {self.what} {ref}", field="ref") from exc


class StatusTier(RowTier[E]):
    """Rows whose own status says archived or not: a wider window, then those asked for, newest first."""

    @abstractmethod
    def _window(self, repos: Repos, limit: int) -> list[Any]: ...

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        records = [self._record(repos, row) for row in self._window(repos, min(MAX_LIST, limit * 4))]
        wanted = [r for r in records if r.status == _status(archived)]
        return sorted(wanted, key=lambda r: int(r.ref), reverse=True)[:limit]


class LLMMemoryTier(StatusTier[LLMMemoryEdit]):
    name, label, what, item_tier, model = "llm_memory", N_("LLM memory"), "llm_memory entry", "llm_memory", LLMMemory
    edit_model = LLMMemoryEdit
    fields = (_field("title"), _field("content", "textarea"), _field("tags", "list"))

    def _window(self, repos: Repos, limit: int) -> list[Any]:
        return repos.llm_memory.recent(limit, include_archived=True)

    def _get(self, repos: Repos, row_id: int) -> LLMMemory:
        return repos.llm_memory.get(row_id)

    def _record(self, repos: Repos, m: LLMMemory) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(m.id),
            title=m.title,
            text=m.content,
            status=_status(m.status != "active"),
            at=m.updated_at,
            fields={"title": m.title, "content": m.content, "tags": _tags(m.tags)},
            details={"thread": m.thread_id, "llm": m.llm_id},
        )

    def edit(self, repos: Repos, ref: str, edit: LLMMemoryEdit, now: datetime) -> None:
        repos.llm_memory.update(ref_id(ref), content=edit.content, title=edit.title, tags=edit.tags)

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.llm_memory.purge(ref_id(ref))


class DiaryTier(StatusTier[DiaryEdit]):
    name, label, what, item_tier, model = "diary", N_("Diary"), "diary entry", "diary", DiaryEntry
    edit_model = DiaryEdit
    fields = (_field("text", "textarea"), _field("tags", "list"), _field("priority", "int"), _field("pinned", "bool"))

    def _window(self, repos: Repos, limit: int) -> list[Any]:
        return repos.diary.list(limit=limit, include_archived=True)

    def _get(self, repos: Repos, row_id: int) -> DiaryEntry:
        return repos.diary.get(row_id)

    def _record(self, repos: Repos, e: DiaryEntry) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(e.id),
            title=f"diary {e.id}",
            text=e.text,
            status=_status(e.status != "active"),
            at=e.updated_at,
            fields={"text": e.text, "tags": _tags(e.tags), "priority": e.priority, "pinned": e.pinned},
            details={"emotions": _tags(e.emotions), "thread": e.thread_id, "tick": e.tick},
        )

    def edit(self, repos: Repos, ref: str, edit: DiaryEdit, now: datetime) -> None:
        entry_id = ref_id(ref)
        if edit.model_fields_set - {"pinned"}:
            repos.diary.update(entry_id, text=edit.text, tags=edit.tags, priority=edit.priority)
        if edit.pinned is not None:
            repos.diary.set_pinned(entry_id, edit.pinned)

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.diary.purge(ref_id(ref))


class ConceptTier(StatusTier[ConceptEdit]):
    name, label, what, item_tier, model = "concept", N_("Concepts"), "concept", "concept", Concept
    edit_model = ConceptEdit
    fields = (
        _field("name"),
        _field("description", "textarea"),
        _field("tags", "list"),
        _field("weight", "float"),
        _field("pinned", "bool"),
    )

    def _window(self, repos: Repos, limit: int) -> list[Any]:
        return repos.concepts.list(limit=limit, include_archived=True)

    def _get(self, repos: Repos, row_id: int) -> Concept:
        return repos.concepts.get(row_id)

    def _record(self, repos: Repos, c: Concept) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(c.id),
            title=c.name,
            text=c.description,
            status=_status(c.status != "active"),
            at=c.updated_at,
            fields={
                "name": c.name,
                "description": c.description,
                "tags": _tags(c.tags),
                "weight": c.weight,
                "pinned": c.pinned,
            },
        )

    def edit(self, repos: Repos, ref: str, edit: ConceptEdit, now: datetime) -> None:
        other = repos.concepts.by_name(edit.name) if edit.name else None
        if other is not None and str(other.id) != ref:
            raise Conflict(f"concept {edit.name!r} exists already (concept {other.id})", field="name")
        repos.concepts.update(
            ref_id(ref),
            name=edit.name,
            description=edit.description,
            tags=edit.tags,
            weight=edit.weight,
            pinned=edit.pinned,
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.concepts.purge(ref_id(ref))


class LinkTier(RowTier[LinkEdit]):
    name, label, what, model = "link", N_("Links"), "link", ConceptLink
    edit_model = LinkEdit
    fields = (_field("relation"), _field("weight", "float"), _field("tags", "list"))

    def records(self, repos: Repos, links: list[ConceptLink]) -> list[MemoryRecord]:
        names = repos.concepts.names({link.source_id for link in links} | {link.target_id for link in links})
        return [
            MemoryRecord(
                tier=self.name,
                ref=str(link.id),
                title=f"{names.get(link.source_id)} —{link.relation}→ {names.get(link.target_id)}",
                status=_status(link.status in ARCHIVED_LINK_STATUSES),
                at=link.updated_at,
                fields={"relation": link.relation, "weight": link.weight, "tags": _tags(link.tags)},
                details={"source": link.source_id, "target": link.target_id, "link_status": link.status},
            )
            for link in links
        ]

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        return self.records(repos, repos.links.archived(limit) if archived else repos.links.list(limit=limit))

    def _get(self, repos: Repos, row_id: int) -> ConceptLink:
        return repos.links.get(row_id)

    def _record(self, repos: Repos, link: ConceptLink) -> MemoryRecord:
        return self.records(repos, [link])[0]

    def edit(self, repos: Repos, ref: str, edit: LinkEdit, now: datetime) -> None:
        repos.links.update(ref_id(ref), relation=edit.relation, weight=edit.weight, tags=edit.tags)

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.links.purge(ref_id(ref))


class GoalTier(RowTier[GoalEdit]):
    """Goals. The consequences of a status change (a warning when one fails, an abstract when one closes) are the
    goal manager's rule (managers/goals.py), which every door's edit goes through."""

    name, label, what, model = "goal", N_("Goals"), "goal", Goal
    edit_model = GoalEdit
    fields = (
        _field("title"),
        _field("description", "textarea"),
        _field("horizon", "choice", choices=("short", "long")),
        _field("status", "choice", choices=("active", "paused", "completed", "failed")),
        _field("priority", "int"),
        _field("tags", "list"),
        _field("related_values", "list"),
        _field("reason"),
    )

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        goals = repos.goals.archived(limit) if archived else repos.goals.list(limit=limit)
        return [self._record(repos, g) for g in goals]

    def _get(self, repos: Repos, row_id: int) -> Goal:
        return repos.goals.get(row_id)

    def _record(self, repos: Repos, g: Goal) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(g.id),
            title=g.title,
            text=g.description,
            status=_status(g.archived_at is not None),
            at=g.updated_at,
            fields={
                "title": g.title,
                "description": g.description,
                "horizon": g.horizon,
                "status": g.status,
                "priority": g.priority,
                "tags": _tags(g.tags),
                "related_values": _tags(g.related_values),
                "reason": g.reason,
            },
            details={"progress": _tags(g.progress_notes)[-5:], "completed_at": g.completed_at},
        )

    def edit(self, repos: Repos, ref: str, edit: GoalEdit, now: datetime) -> None:
        repos.goals.update(
            ref_id(ref),
            title=edit.title,
            description=edit.description,
            horizon=edit.horizon,
            status=edit.status,
            priority=edit.priority,
            tags=edit.tags,
            reason=edit.reason,
            related_values=edit.related_values,
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.goals.purge(ref_id(ref))


class TaskTier(RowTier[TaskEdit]):
    name, label, what, model = "task", N_("Tasks"), "task", Task
    edit_model = TaskEdit
    fields = (
        _field("title"),
        _field("description", "textarea"),
        _field("status", "choice", choices=("open", "in_progress", "done", "failed", "cancelled", "frozen")),
        _field("priority", "int"),
        _field("pinned", "bool"),
        _field("tags", "list"),
    )

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        tasks = repos.tasks.archived(limit) if archived else repos.tasks.list(limit=limit)
        return [self._record(repos, t) for t in tasks]

    def _get(self, repos: Repos, row_id: int) -> Task:
        return repos.tasks.get(row_id)

    def _record(self, repos: Repos, t: Task) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(t.id),
            title=t.title,
            text=t.description,
            status=_status(t.archived_at is not None),
            at=t.updated_at,
            fields={
                "title": t.title,
                "description": t.description,
                "status": t.status,
                "priority": t.priority,
                "pinned": t.pinned,
                "tags": _tags(t.tags),
            },
            details={"goal": t.goal_id, "kind": t.kind, "cycle": t.repl_status},
        )

    def edit(self, repos: Repos, ref: str, edit: TaskEdit, now: datetime) -> None:
        repos.tasks.update(
            ref_id(ref),
            title=edit.title,
            description=edit.description,
            status=edit.status,
            priority=edit.priority,
            pinned=edit.pinned,
            tags=edit.tags,
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.tasks.purge(ref_id(ref))


class FactTier(RowTier[FactEdit]):
    name, label, what, model = "fact", N_("Unverified facts"), "fact", UnverifiedFact
    archivable = False
    edit_model = FactEdit
    fields = (
        _field("claim", "textarea"),
        _field("context", "textarea"),
        _field("confidence", "float"),
        _field("priority", "int"),
        _field("status", "choice", label=N_("Resolve as"), choices=("verified", "rejected")),
        _field("resolution", optional=True),
    )

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        return [] if archived else [self._record(repos, f) for f in repos.facts.list(limit=limit)]

    def _get(self, repos: Repos, row_id: int) -> UnverifiedFact:
        return repos.facts.get(row_id)

    def _record(self, repos: Repos, f: UnverifiedFact) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(f.id),
            title=f.status,
            text=f.claim,
            at=f.created_at,
            fields={"claim": f.claim, "context": f.context, "confidence": f.confidence, "priority": f.priority},
            details={
                "status": f.status,
                "resolution": f.resolution,
                "why": f.why_unverified,
                "task": f.task_id,
                "sources": _tags(f.sources),
            },
        )

    def edit(self, repos: Repos, ref: str, edit: FactEdit, now: datetime) -> None:
        fact_id = ref_id(ref)
        repos.facts.update(
            fact_id, claim=edit.claim, context=edit.context, confidence=edit.confidence, priority=edit.priority
        )
        if edit.status is not None:
            repos.facts.resolve(fact_id, edit.status, edit.resolution or "")

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.facts.purge(ref_id(ref))


class QuestionTier(RowTier[QuestionEdit]):
    name, label, what, model = "question", N_("Open questions"), "question", OpenQuestion
    archivable = False
    edit_model = QuestionEdit
    fields = (
        _field("topic", "textarea"),
        _field("context", "textarea"),
        _field("priority", "float"),
        _field("resolution", label=N_("Resolve with"), optional=True),
    )

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        return [] if archived else [self._record(repos, q) for q in repos.questions.list(limit=limit)]

    def _get(self, repos: Repos, row_id: int) -> OpenQuestion:
        return repos.questions.get(row_id)

    def _record(self, repos: Repos, q: OpenQuestion) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(q.id),
            title=q.status,
            text=q.topic,
            at=q.resolved_at or q.created_at,
            fields={"topic": q.topic, "context": q.context, "priority": q.priority},
            details={"status": q.status, "resolution": q.resolution, "source": q.source},
        )

    def edit(self, repos: Repos, ref: str, edit: QuestionEdit, now: datetime) -> None:
        question_id = ref_id(ref)
        repos.questions.update(question_id, topic=edit.topic, context=edit.context, priority=edit.priority)
        if edit.resolution:
            repos.questions.resolve(question_id, edit.resolution, now)

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.questions.purge(ref_id(ref))


# ---- the tiers archived through their retrieval item (episodes, entities, insights, knowledge base) -----------


class ItemTier(RowTier[E]):
    """Rows whose archived state is their retrieval item's status (`item_tier` is their own name)."""

    def _item_ref(self, row: Any) -> str:
        return str(row.id)

    @abstractmethod
    def _latest(self, repos: Repos, limit: int) -> list[Any]: ...

    @abstractmethod
    def _as_record(self, row: Any, status: Status) -> MemoryRecord: ...

    def _record(self, repos: Repos, row: Any) -> MemoryRecord:
        ref = self._item_ref(row)
        return self._as_record(row, _as_status(repos.items.statuses(self.name, [ref]).get(ref, "active")))

    def _archived_ids(self, repos: Repos, limit: int) -> list[int]:
        refs = [item.ref.split(":", 1)[0] for item in repos.items.of_tier(self.name, "archived")]
        return sorted({int(r) for r in refs if r.isascii() and r.isdigit()}, reverse=True)[:limit]

    def rows(self, repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        found: list[Any] = []
        if archived:
            for row_id in self._archived_ids(repos, limit):
                try:
                    found.append(self._get(repos, row_id))
                except NotFound:
                    continue
        else:
            found = self._latest(repos, min(MAX_LIST, limit * 2))
        statuses = repos.items.statuses(self.name, [self._item_ref(row) for row in found])
        records = [self._as_record(row, _as_status(statuses.get(self._item_ref(row), "active"))) for row in found]
        return [r for r in records if r.status == _status(archived)][:limit]


def _as_status(status: str) -> Status:
    return "archived" if status == "archived" else "active"


class EpisodeTier(ItemTier[EpisodeEdit]):
    name, label, what, item_tier, model = "episode", N_("Episodes"), "episode", "episode", Episode
    edit_model = EpisodeEdit
    fields = (_field("summary", "textarea"), _field("emotional_tone"), _field("key_events", "lines"))

    def _latest(self, repos: Repos, limit: int) -> list[Any]:
        return repos.episodes.list(limit=limit)

    def _get(self, repos: Repos, row_id: int) -> Episode:
        return repos.episodes.by_id(row_id)

    def _as_record(self, e: Episode, status: Status) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(e.id),
            title=f"{e.period} of {e.start}",
            text=e.summary,
            status=status,
            at=e.created_at,
            fields={"summary": e.summary, "emotional_tone": e.emotional_tone, "key_events": _tags(e.key_events)},
            details={"period": e.period, "start": e.start},
        )

    def edit(self, repos: Repos, ref: str, edit: EpisodeEdit, now: datetime) -> None:
        repos.episodes.update(
            ref_id(ref), summary=edit.summary, emotional_tone=edit.emotional_tone, key_events=edit.key_events
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.episodes.purge(ref_id(ref))


class EntityTier(ItemTier[EntityEdit]):
    name, label, what, item_tier, model = "entity", N_("Entities"), "entity", "entity", Entity
    edit_model = EntityEdit
    fields = (
        _field("name"),
        _field("kind", "choice", choices=("person", "place", "thing", "concept")),
        _field("description", "textarea"),
        _field("facts", "lines"),
        _field("aliases", "list"),
    )

    def _latest(self, repos: Repos, limit: int) -> list[Any]:
        return list(reversed(repos.entities.all(limit=MAX_LIST)))[:limit]

    def _get(self, repos: Repos, row_id: int) -> Entity:
        return repos.entities.get(row_id)

    def _as_record(self, e: Entity, status: Status) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(e.id),
            title=e.name,
            text=e.description,
            status=status,
            at=e.updated_at,
            fields={
                "name": e.name,
                "kind": e.kind,
                "description": e.description,
                "facts": _tags(e.facts),
                "aliases": _tags(e.aliases),
            },
        )

    def edit(self, repos: Repos, ref: str, edit: EntityEdit, now: datetime) -> None:
        repos.entities.update(
            ref_id(ref),
            name=edit.name,
            kind=edit.kind,
            description=edit.description,
            facts=edit.facts,
            aliases=edit.aliases,
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.entities.purge(ref_id(ref))


class InsightTier(ItemTier[InsightEdit]):
    name, label, what, item_tier, model = "insight", N_("Dream insights"), "insight", "insight", Insight
    edit_model = InsightEdit
    fields = (
        _field("insight", "textarea"),
        _field("strategy", "textarea"),
        _field("log_entry", "textarea"),
        _field("trigger_topic"),
    )

    def _latest(self, repos: Repos, limit: int) -> list[Any]:
        return repos.insights.recent(limit)

    def _get(self, repos: Repos, row_id: int) -> Insight:
        return repos.insights.get(row_id)

    def _as_record(self, i: Insight, status: Status) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(i.id),
            title=i.trigger_topic or f"dream {i.id}",
            text=i.insight,
            status=status,
            at=i.created_at,
            fields={
                "insight": i.insight,
                "strategy": i.strategy,
                "log_entry": i.log_entry,
                "trigger_topic": i.trigger_topic,
            },
            details={"level": i.level},
        )

    def edit(self, repos: Repos, ref: str, edit: InsightEdit, now: datetime) -> None:
        repos.insights.update(
            ref_id(ref),
            insight=edit.insight,
            strategy=edit.strategy,
            log_entry=edit.log_entry,
            trigger_topic=edit.trigger_topic,
        )

    def _purge(self, repos: Repos, ref: str) -> None:
        repos.insights.purge(ref_id(ref))


class KBTier(ItemTier[NoEdit]):
    """Knowledge-base documents: archived and restored through the document's status (all its chunks), not edited;
    uploads go through the memory manager."""

    name, label, what, item_tier, model = "kb", N_("Knowledge base"), "kb", "kb", KBDocument
    edit_model = None

    def _item_ref(self, row: Any) -> str:
        return f"{row.id}:0"

    def _latest(self, repos: Repos, limit: int) -> list[Any]:
        return list(reversed(repos.kb.list()))[:limit]

    def _get(self, repos: Repos, row_id: int) -> KBDocument:
        return repos.kb.get(row_id)

    def _as_record(self, d: KBDocument, status: Status) -> MemoryRecord:
        return MemoryRecord(
            tier=self.name,
            ref=str(d.id),
            title=d.title,
            text=d.path,
            status=status,
            at=d.created_at,
            details={"chunks": d.chunks, "chars": d.chars, "path": d.path, **({"from": d.source} if d.source else {})},
        )

    def _archive(self, repos: Repos, ref: str, now: datetime) -> bool:
        return repos.kb.set_status(int(ref), "archived")

    def _restore(self, repos: Repos, ref: str) -> bool:
        return repos.kb.set_status(int(ref), "active")

    def _purge(self, repos: Repos, ref: str) -> None:
        try:
            repos.kb.remove(ref_id(ref))
        except RowNotFound:
            raise
        except NotFound as exc:
            raise RowNotFound(f"no knowledge-base document {ref}", field="ref") from exc


# ---- all of them ------------------------------------------------------------------------------------------------

CORE, NOTEPAD = BlockTier("core", N_("Core memory")), BlockTier("notepad", N_("Notepad"))
LLM_MEMORY, DIARY, CONCEPTS, LINKS = LLMMemoryTier(), DiaryTier(), ConceptTier(), LinkTier()
GOALS, TASKS, EPISODES, ENTITIES, INSIGHTS = GoalTier(), TaskTier(), EpisodeTier(), EntityTier(), InsightTier()
FACTS, QUESTIONS, KB = FactTier(), QuestionTier(), KBTier()

AnyTier = Tier[Any]
TIERS: dict[str, AnyTier] = {
    tier.name: tier
    for tier in (
        CORE,
        NOTEPAD,
        LLM_MEMORY,
        DIARY,
        CONCEPTS,
        LINKS,
        GOALS,
        TASKS,
        EPISODES,
        ENTITIES,
        INSIGHTS,
        FACTS,
        QUESTIONS,
        KB,
    )
}


def tier_of(name: str) -> AnyTier:
    tier = TIERS.get(name)
    if tier is None:
        raise UnknownTier(f"no memory tier {name!r}; the tiers: {', '.join(TIERS)}", field="tier")
    return tier


def searchable(names: Iterable[str] | None) -> list[str] | None:
    """The retrieval tiers of the tiers named (None: all of them); Invalid naming the ones that are not searchable."""
    if not names:
        return None
    names = list(names)
    unknown = [t for t in names if t not in TIERS or TIERS[t].item_tier is None]
    if unknown:
        found = ", ".join(t.name for t in TIERS.values() if t.item_tier)
        raise Invalid(f"not searchable: {', '.join(unknown)} (searchable: {found})", field="tiers")
    return [str(TIERS[t].item_tier) for t in names]


def hit_ref(tier: str, ref: str) -> str:
    """A retrieval item's ref as its row's ref (a knowledge-base chunk `doc:chunk` is its document)."""
    return ref.split(":", 1)[0] if tier == "kb" else ref


__all__ = [
    "TIERS",
    "BlockEdit",
    "ConceptEdit",
    "Conflict",
    "DiaryEdit",
    "EntityEdit",
    "EpisodeEdit",
    "FactEdit",
    "FieldInfo",
    "GoalEdit",
    "InsightEdit",
    "Invalid",
    "LLMMemoryEdit",
    "LinkEdit",
    "MemoryRecord",
    "NotEditable",
    "QuestionEdit",
    "RowNotFound",
    "TaskEdit",
    "Tier",
    "TierEdit",
    "TierError",
    "TooLarge",
    "UnknownTier",
    "Unsupported",
    "hit_ref",
    "ref_id",
    "searchable",
    "tier_of",
]
