"""Memory: browse and search every tier, a human's edits, archive / restore / delete, the history of every change,
and knowledge-base uploads.

Each tier is a `Tier` (what it is called, what may be done to it) over its repository. Reads take the request's unit
of work; a write opens its own unit as the human (`actor="human"`, so the memory history names who did it), commits,
and then brings the retrieval index up to date so search sees it at once. A human's delete purges for good (the
persona's own deletes only archive)."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from memory import Repos
from memory.knowledge import KnowledgeError, ingest
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
    OpenQuestion,
    Task,
    UnverifiedFact,
)
from memory.repositories import MemoryLimitError, NotFound
from memory.repositories.concepts import ARCHIVED_LINK_STATUSES
from memory.retrieval.index import Query
from web.context import WebServices
from web.errors import NotFoundError, ServiceError
from web.schemas import MAX_ID
from web.schemas.memory import (
    BlockEdit,
    Change,
    ConceptEdit,
    DiaryEdit,
    Done,
    EntityEdit,
    EpisodeEdit,
    FactEdit,
    FieldInfo,
    GoalEdit,
    History,
    InsightEdit,
    KBUploaded,
    LinkEdit,
    LLMMemoryEdit,
    MemoryList,
    MemoryRecord,
    QuestionEdit,
    SearchHit,
    SearchResults,
    TaskEdit,
    TierInfo,
    Tiers,
)

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # a knowledge-base document
UPLOAD_DIR = "knowledge"  # under the data dir: the uploaded files, one directory per content hash
MAX_LIST = 500
BLOCKS = ("core", "notepad")


def _field_info(name: str, kind: str = "text", label: str | None = None, choices: Iterable[str] = (),
       optional: bool = False) -> FieldInfo:
    return FieldInfo(name=name, label=label or name.replace("_", " ").capitalize(), kind=kind, choices=list(choices),
                     optional=optional)


def _ref_id(ref: str) -> int:
    if not str(ref).isdigit() or int(ref) > MAX_ID:
        raise NotFoundError(f"no row {str(ref)[:40]!r}: this tier's refs are numbers", field="ref")
    return int(ref)


def _status(archived: bool) -> str:
    return "archived" if archived else "active"


@dataclass(frozen=True)
class Tier:
    """One tier of memory and what the page may do to it. `item_tier`: its tier in the retrieval catalogue (None:
    not searchable). The functions take a unit of work: `rows(repos, archived, limit)`, `one(repos, ref)`,
    `edit(repos, ref, fields, services)`, `purge(repos, ref)`, `count(repos)`."""

    name: str
    label: str
    rows: Callable[[Repos, bool, int], list[MemoryRecord]]
    one: Callable[[Repos, str], MemoryRecord]
    count: Callable[[Repos], int]
    edit_model: type[BaseModel] | None = None
    edit: Callable[..., None] | None = None
    purge: Callable[[Repos, str], None] | None = None
    fields: tuple[FieldInfo, ...] = ()
    item_tier: str | None = None
    archivable: bool = True

    @property
    def versioned(self) -> bool:
        """Core memory and the notepad: one text, whose replaced versions are what "archived" lists."""
        return self.name in BLOCKS

    @property
    def archived_label(self) -> str:
        return "replaced versions" if self.versioned else "archived"

    @property
    def uploads(self) -> bool:
        return self.name == "kb"

    def actions(self, record: MemoryRecord) -> MemoryRecord:
        """The record with what may be done to it now."""
        active, version = record.status == "active", self.versioned and record.ref != self.name
        can = {"edit": self.edit is not None and active and not version,
               "archive": self.archivable and active,
               "restore": not active and (self.archivable or version),
               "delete": self.purge is not None,
               "history": not version}
        return record.model_copy(update={"actions": [name for name, ok in can.items() if ok]})

    def info(self, repos: Repos) -> TierInfo:
        return TierInfo(name=self.name, label=self.label, count=self.count(repos),
                        searchable=self.item_tier is not None, archivable=self.archivable,
                        editable=self.edit is not None, deletable=self.purge is not None, fields=list(self.fields))


# ---- core memory and the notepad ------------------------------------------------------------------------------


def _block_tier(name: str, label: str) -> Tier:
    def record(repos: Repos) -> MemoryRecord:
        block = repos.blocks.get(name)
        return MemoryRecord(tier=name, ref=name, title=label, text=block.content, at=block.updated_at,
                            fields={"content": block.content},
                            details={"chars": len(block.content), "char_limit": block.char_limit})

    def version(v) -> MemoryRecord:
        return MemoryRecord(tier=name, ref=str(v.id), title="replaced version", text=v.content, status="archived",
                            at=v.replaced_at,
                            details={"restore": "puts this text back; the current one becomes a version"})

    def rows(repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        return [version(v) for v in repos.blocks.versions(name, limit)] if archived else [record(repos)]

    def one(repos: Repos, ref: str) -> MemoryRecord:
        if ref == name:
            return record(repos)
        found = [v for v in repos.blocks.versions(name, MAX_LIST) if str(v.id) == ref]
        if not found:
            raise NotFoundError(f"{label.lower()} has no version {ref!r} (its ref is {name!r})", field="ref")
        return version(found[0])

    def edit(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
        if ref != name:
            raise ServiceError(f"a replaced version is not edited; restore it, or edit {name!r}", field="ref",
                               status=409)
        if "content" in fields:
            try:
                repos.blocks.write(name, fields["content"])
            except MemoryLimitError as exc:
                raise ServiceError(str(exc), field="content", status=422) from exc

    return Tier(name, label, rows, one, lambda repos: 1 + len(repos.blocks.versions(name, MAX_LIST)), BlockEdit, edit,
                fields=(_field_info("content", "textarea"),), archivable=False)


# ---- the row tiers ---------------------------------------------------------------------------------------------


def _tags(values: Any) -> list[str]:
    return [str(v) for v in values or []]


def _diary(e: DiaryEntry) -> MemoryRecord:
    return MemoryRecord(tier="diary", ref=str(e.id), title=f"diary {e.id}", text=e.text,
                        status=_status(e.status != "active"), at=e.updated_at,
                        fields={"text": e.text, "tags": _tags(e.tags), "priority": e.priority, "pinned": e.pinned},
                        details={"emotions": _tags(e.emotions), "thread": e.thread_id, "tick": e.tick})


def _llm_memory(m: LLMMemory) -> MemoryRecord:
    return MemoryRecord(tier="llm_memory", ref=str(m.id), title=m.title, text=m.content,
                        status=_status(m.status != "active"), at=m.updated_at,
                        fields={"title": m.title, "content": m.content, "tags": _tags(m.tags)},
                        details={"thread": m.thread_id, "llm": m.llm_id})


def _concept(c: Concept) -> MemoryRecord:
    return MemoryRecord(tier="concept", ref=str(c.id), title=c.name, text=c.description,
                        status=_status(c.status != "active"), at=c.updated_at,
                        fields={"name": c.name, "description": c.description, "tags": _tags(c.tags), "weight": c.weight,
                                "pinned": c.pinned})


def _links(repos: Repos, links: list[ConceptLink]) -> list[MemoryRecord]:
    names = repos.concepts.names({link.source_id for link in links} | {link.target_id for link in links})
    return [MemoryRecord(tier="link", ref=str(link.id), title=f"{names.get(link.source_id)} —{link.relation}→ "
                         f"{names.get(link.target_id)}", status=_status(link.status in ARCHIVED_LINK_STATUSES),
                         at=link.updated_at, fields={"relation": link.relation, "weight": link.weight,
                                                     "tags": _tags(link.tags)},
                         details={"source": link.source_id, "target": link.target_id, "link_status": link.status})
            for link in links]


def _goal(g: Goal) -> MemoryRecord:
    return MemoryRecord(tier="goal", ref=str(g.id), title=g.title, text=g.description,
                        status=_status(g.archived_at is not None), at=g.updated_at,
                        fields={"title": g.title, "description": g.description, "horizon": g.horizon,
                                "status": g.status, "priority": g.priority, "tags": _tags(g.tags), "reason": g.reason},
                        details={"progress": _tags(g.progress_notes)[-5:], "completed_at": g.completed_at})


def _task(t: Task) -> MemoryRecord:
    return MemoryRecord(tier="task", ref=str(t.id), title=t.title, text=t.description,
                        status=_status(t.archived_at is not None), at=t.updated_at,
                        fields={"title": t.title, "description": t.description, "status": t.status,
                                "priority": t.priority, "pinned": t.pinned, "tags": _tags(t.tags)},
                        details={"goal": t.goal_id, "kind": t.kind, "cycle": t.repl_status})


def _fact(f: UnverifiedFact) -> MemoryRecord:
    return MemoryRecord(tier="fact", ref=str(f.id), title=f.status, text=f.claim, at=f.created_at,
                        fields={"claim": f.claim, "context": f.context, "confidence": f.confidence,
                                "priority": f.priority},
                        details={"status": f.status, "resolution": f.resolution, "why": f.why_unverified,
                                 "task": f.task_id, "sources": _tags(f.sources)})


def _question(q: OpenQuestion) -> MemoryRecord:
    return MemoryRecord(tier="question", ref=str(q.id), title=q.status, text=q.topic, at=q.resolved_at or q.created_at,
                        fields={"topic": q.topic, "context": q.context, "priority": q.priority},
                        details={"status": q.status, "resolution": q.resolution, "source": q.source})


def _status_rows(fetch: Callable[[int], list[Any]], to_record: Callable[[Any], MemoryRecord], archived: bool,
                 limit: int) -> list[MemoryRecord]:
    """Rows whose own status says archived or not: a wider window, then those asked for, newest first."""
    records = [to_record(row) for row in fetch(min(MAX_LIST, limit * 4))]
    wanted = [r for r in records if r.status == _status(archived)]
    return sorted(wanted, key=lambda r: int(r.ref), reverse=True)[:limit]


def _one(getter: Callable[[Repos], Callable[[int], Any]], to_record: Callable[[Any], MemoryRecord],
         what: str) -> Callable[[Repos, str], MemoryRecord]:
    def one(repos: Repos, ref: str) -> MemoryRecord:
        try:
            return to_record(getter(repos)(_ref_id(ref)))
        except NotFound as exc:
            raise NotFoundError(f"no {what} {ref}", field="ref") from exc
    return one


def _edit_diary(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
    entry_id = _ref_id(ref)
    pinned = fields.pop("pinned", None)
    if fields:
        repos.diary.update(entry_id, **fields)
    if pinned is not None:
        repos.diary.set_pinned(entry_id, pinned)


def _edit_concept(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
    name = fields.get("name")
    other = repos.concepts.by_name(name) if name else None
    if other is not None and str(other.id) != ref:
        raise ServiceError(f"concept {name!r} exists already (concept {other.id})", field="name", status=409)
    repos.concepts.update(_ref_id(ref), **fields)


def _edit_fact(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
    fact_id = _ref_id(ref)
    status, resolution = fields.pop("status", None), fields.pop("resolution", None)
    repos.facts.update(fact_id, **fields)
    if status is not None:
        repos.facts.resolve(fact_id, status, resolution or "")


def _edit_question(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
    question_id = _ref_id(ref)
    resolution = fields.pop("resolution", None)
    repos.questions.update(question_id, **fields)
    if resolution:
        repos.questions.resolve(question_id, resolution, services.clock())


def _by_id(method: str) -> Callable[..., None]:
    """An edit that hands the fields to `repos.<repo>.<method>(id, **fields)`."""
    repo_name, verb = method.split(".")

    def edit(repos: Repos, ref: str, fields: dict[str, Any], services: WebServices) -> None:
        getattr(getattr(repos, repo_name), verb)(_ref_id(ref), **fields)
    return edit


def _purge(method: str) -> Callable[[Repos, str], None]:
    repo_name, verb = method.split(".")

    def purge(repos: Repos, ref: str) -> None:
        getattr(getattr(repos, repo_name), verb)(_ref_id(ref))
    return purge


# ---- the tiers archived through their retrieval item (episodes, entities, insights, knowledge base) -----------


def _item_status_rows(repos: Repos, tier: str, rows: list[Any], to_record: Callable[[Any, str], MemoryRecord],
                      archived: bool, limit: int,
                      ref_of: Callable[[Any], str] = lambda row: str(row.id)) -> list[MemoryRecord]:
    statuses = repos.items.statuses(tier, [ref_of(row) for row in rows])
    records = [to_record(row, statuses.get(ref_of(row), "active")) for row in rows]
    return [r for r in records if r.status == _status(archived)][:limit]


def _archived_refs(repos: Repos, tier: str, limit: int) -> list[int]:
    refs = [item.ref.split(":", 1)[0] for item in repos.items.of_tier(tier, "archived")]
    return sorted({int(r) for r in refs if r.isdigit()}, reverse=True)[:limit]


def _as_status(status: str) -> str:
    return "archived" if status == "archived" else "active"


def _episode(e: Episode, status: str = "active") -> MemoryRecord:
    return MemoryRecord(tier="episode", ref=str(e.id), title=f"{e.period} of {e.start}", text=e.summary,
                        status=_as_status(status), at=e.created_at,
                        fields={"summary": e.summary, "emotional_tone": e.emotional_tone,
                                "key_events": _tags(e.key_events)},
                        details={"period": e.period, "start": e.start})


def _entity(e: Entity, status: str = "active") -> MemoryRecord:
    return MemoryRecord(tier="entity", ref=str(e.id), title=e.name, text=e.description, status=_as_status(status),
                        at=e.updated_at, fields={"name": e.name, "kind": e.kind, "description": e.description,
                                                 "facts": _tags(e.facts), "aliases": _tags(e.aliases)})


def _insight(i: Insight, status: str = "active") -> MemoryRecord:
    return MemoryRecord(tier="insight", ref=str(i.id), title=i.trigger_topic or f"dream {i.id}", text=i.insight,
                        status=_as_status(status), at=i.created_at,
                        fields={"insight": i.insight, "strategy": i.strategy, "log_entry": i.log_entry,
                                "trigger_topic": i.trigger_topic}, details={"level": i.level})


def _kb_document(d: KBDocument, status: str = "active") -> MemoryRecord:
    return MemoryRecord(tier="kb", ref=str(d.id), title=d.title, text=d.path, status=_as_status(status),
                        at=d.created_at, details={"chunks": d.chunks, "chars": d.chars, "path": d.path})


def _item_tier(tier: str, listing: Callable[[Repos, int], list[Any]], getter: Callable[[Repos, int], Any],
               to_record: Callable[[Any, str], MemoryRecord], ref_of: Callable[[Any], str] = lambda row: str(row.id)):
    def rows(repos: Repos, archived: bool, limit: int) -> list[MemoryRecord]:
        if archived:
            found = []
            for row_id in _archived_refs(repos, tier, limit):
                try:
                    found.append(getter(repos, row_id))
                except NotFound:
                    continue
        else:
            found = listing(repos, min(MAX_LIST, limit * 2))
        return _item_status_rows(repos, tier, found, to_record, archived, limit, ref_of)

    def one(repos: Repos, ref: str) -> MemoryRecord:
        try:
            row = getter(repos, _ref_id(ref))
        except NotFound as exc:
            raise NotFoundError(f"no {tier} {ref}", field="ref") from exc
        return to_record(row, repos.items.statuses(tier, [ref_of(row)]).get(ref_of(row), "active"))

    return rows, one


def _kb_purge(repos: Repos, ref: str) -> None:
    try:
        repos.kb.remove(_ref_id(ref))
    except NotFound as exc:
        raise NotFoundError(f"no knowledge-base document {ref}", field="ref") from exc


def _one_link(repos: Repos, ref: str) -> MemoryRecord:
    try:
        return _links(repos, [repos.links.get(_ref_id(ref))])[0]
    except NotFound as exc:
        raise NotFoundError(f"no link {ref}", field="ref") from exc


def _build_tiers() -> dict[str, Tier]:
    tags, pinned, priority = _field_info("tags", "list"), _field_info("pinned", "bool"), _field_info("priority", "int")
    episode_rows, episode_one = _item_tier("episode", lambda r, n: r.episodes.list(limit=n),
                                           lambda r, i: r.episodes.by_id(i), _episode)
    entity_rows, entity_one = _item_tier("entity", lambda r, n: list(reversed(r.entities.all(limit=MAX_LIST)))[:n],
                                         lambda r, i: r.entities.get(i), _entity)
    insight_rows, insight_one = _item_tier("insight", lambda r, n: r.insights.recent(n), lambda r, i: r.insights.get(i),
                                           _insight)
    kb_rows, kb_one = _item_tier("kb", lambda r, n: list(reversed(r.kb.list()))[:n], lambda r, i: r.kb.get(i), _kb_document,
                                 ref_of=lambda d: f"{d.id}:0")

    def count(model: type) -> Callable[[Repos], int]:
        return lambda repos: repos.history.table_sizes([model])[model]

    tiers = [
        _block_tier("core", "Core memory"),
        _block_tier("notepad", "Notepad"),
        Tier("llm_memory", "LLM memory",
             lambda r, a, n: _status_rows(lambda k: r.llm_memory.recent(k, include_archived=True), _llm_memory, a, n),
             _one(lambda r: r.llm_memory.get, _llm_memory, "llm_memory entry"), count(LLMMemory), LLMMemoryEdit,
             _by_id("llm_memory.update"), _purge("llm_memory.purge"),
             (_field_info("title"), _field_info("content", "textarea"), tags), item_tier="llm_memory"),
        Tier("diary", "Diary",
             lambda r, a, n: _status_rows(lambda k: r.diary.list(limit=k, include_archived=True), _diary, a, n),
             _one(lambda r: r.diary.get, _diary, "diary entry"), count(DiaryEntry), DiaryEdit, _edit_diary,
             _purge("diary.purge"), (_field_info("text", "textarea"), tags, priority, pinned), item_tier="diary"),
        Tier("concept", "Concepts",
             lambda r, a, n: _status_rows(lambda k: r.concepts.list(limit=k, include_archived=True), _concept, a, n),
             _one(lambda r: r.concepts.get, _concept, "concept"), count(Concept), ConceptEdit, _edit_concept,
             _purge("concepts.purge"), (_field_info("name"), _field_info("description", "textarea"), tags, _field_info("weight", "float"), pinned),
             item_tier="concept"),
        Tier("link", "Links",
             lambda r, a, n: _links(r, r.links.archived(n) if a else r.links.list(limit=n)),
             _one_link, count(ConceptLink), LinkEdit,
             _by_id("links.update"), _purge("links.purge"), (_field_info("relation"), _field_info("weight", "float"), tags)),
        Tier("goal", "Goals",
             lambda r, a, n: [_goal(g) for g in (r.goals.archived(n) if a else r.goals.list(limit=n))],
             _one(lambda r: r.goals.get, _goal, "goal"), count(Goal), GoalEdit, _by_id("goals.update"),
             _purge("goals.purge"),
             (_field_info("title"), _field_info("description", "textarea"), _field_info("horizon", "choice", choices=("short", "long")),
              _field_info("status", "choice", choices=("active", "paused", "completed", "failed")), priority, tags,
              _field_info("reason"))),
        Tier("task", "Tasks",
             lambda r, a, n: [_task(t) for t in (r.tasks.archived(n) if a else r.tasks.list(limit=n))],
             _one(lambda r: r.tasks.get, _task, "task"), count(Task), TaskEdit, _by_id("tasks.update"),
             _purge("tasks.purge"),
             (_field_info("title"), _field_info("description", "textarea"),
              _field_info("status", "choice", choices=("open", "in_progress", "done", "failed", "cancelled", "frozen")),
              priority, pinned, tags)),
        Tier("episode", "Episodes", episode_rows, episode_one, count(Episode), EpisodeEdit, _by_id("episodes.update"),
             _purge("episodes.purge"), (_field_info("summary", "textarea"), _field_info("emotional_tone"), _field_info("key_events", "lines")),
             item_tier="episode"),
        Tier("entity", "Entities", entity_rows, entity_one, count(Entity), EntityEdit, _by_id("entities.update"),
             _purge("entities.purge"),
             (_field_info("name"), _field_info("kind", "choice", choices=("person", "place", "thing", "concept")),
              _field_info("description", "textarea"), _field_info("facts", "lines"), _field_info("aliases", "list")), item_tier="entity"),
        Tier("insight", "Dream insights", insight_rows, insight_one, count(Insight), InsightEdit,
             _by_id("insights.update"), _purge("insights.purge"),
             (_field_info("insight", "textarea"), _field_info("strategy", "textarea"), _field_info("log_entry", "textarea"), _field_info("trigger_topic")),
             item_tier="insight"),
        Tier("fact", "Unverified facts",
             lambda r, a, n: [] if a else [_fact(f) for f in r.facts.list(limit=n)],
             _one(lambda r: r.facts.get, _fact, "fact"), count(UnverifiedFact), FactEdit, _edit_fact,
             _purge("facts.purge"),
             (_field_info("claim", "textarea"), _field_info("context", "textarea"), _field_info("confidence", "float"), priority,
              _field_info("status", "choice", label="Resolve as", choices=("verified", "rejected")),
              _field_info("resolution", optional=True)),
             archivable=False),
        Tier("question", "Open questions",
             lambda r, a, n: [] if a else [_question(q) for q in r.questions.list(limit=n)],
             _one(lambda r: r.questions.get, _question, "question"), count(OpenQuestion), QuestionEdit, _edit_question,
             _purge("questions.purge"),
             (_field_info("topic", "textarea"), _field_info("context", "textarea"), _field_info("priority", "float"),
              _field_info("resolution", label="Resolve with", optional=True)), archivable=False),
        Tier("kb", "Knowledge base", kb_rows, kb_one, count(KBDocument), purge=_kb_purge, item_tier="kb"),
    ]
    return {tier.name: tier for tier in tiers}


TIERS: dict[str, Tier] = _build_tiers()


def tier_of(name: str) -> Tier:
    tier = TIERS.get(name)
    if tier is None:
        raise NotFoundError(f"no memory tier {name!r}; the tiers: {', '.join(TIERS)}", field="tier")
    return tier


# ---- reading ---------------------------------------------------------------------------------------------------


def tiers(repos: Repos) -> Tiers:
    return Tiers(tiers=[tier.info(repos) for tier in TIERS.values()])


def _index(services: WebServices, flush: bool = False) -> int:
    """Bring the retrieval index up to what was just committed; a failure is logged and the next sync repairs it."""
    try:
        return services.memory.sync(flush=flush)
    except Exception:
        log.exception("memory index sync failed; it is retried on the next sync")
        return 0


def list_tier(repos: Repos, services: WebServices, name: str, *, q: str | None = None, archived: bool = False,
              limit: int = 50) -> MemoryList:
    """A tier's rows, newest first (archived ones instead when asked); `q` narrows them: by hybrid search in a
    searchable tier, by the words in the others."""
    tier = tier_of(name)
    q = (q or "").strip() or None
    if q is None:
        items = tier.rows(repos, archived, limit)
    elif tier.item_tier is not None:
        hits = services.memory.search(Query(text=q, k=limit, tiers=[tier.item_tier], include_archived=archived))
        refs = list(dict.fromkeys(_hit_ref(hit.item.tier, hit.item.ref) for hit in hits))
        items = []
        for ref in refs:
            try:
                record = tier.one(repos, ref)
            except NotFoundError:
                continue
            if record.status == _status(archived):
                items.append(record)
    else:
        words = q.lower().split()
        items = [r for r in tier.rows(repos, archived, MAX_LIST)
                 if all(w in f"{r.title}\n{r.text}".lower() for w in words)][:limit]
    return MemoryList(tier=name, archived=archived, q=q, items=[tier.actions(r) for r in items])


def get_record(repos: Repos, name: str, ref: str) -> MemoryRecord:
    tier = tier_of(name)
    return tier.actions(tier.one(repos, str(ref)))


def _hit_ref(tier: str, ref: str) -> str:
    return ref.split(":", 1)[0] if tier == "kb" else ref


def search(services: WebServices, q: str, *, k: int = 10, tiers: list[str] | None = None,
           archived: bool = False) -> SearchResults:
    """The persona's own hybrid retrieval (BM25 + vectors, fused) across the searchable tiers (or those named)."""
    wanted = None
    if tiers:
        unknown = [t for t in tiers if t not in TIERS or TIERS[t].item_tier is None]
        if unknown:
            searchable = ", ".join(t.name for t in TIERS.values() if t.item_tier)
            raise ServiceError(f"not searchable: {', '.join(unknown)} (searchable: {searchable})", field="tiers",
                               status=422)
        wanted = [TIERS[t].item_tier for t in tiers]
    hits = services.memory.search(Query(text=q, k=k, tiers=wanted, include_archived=archived)) if q.strip() else []
    return SearchResults(q=q, hits=[SearchHit(tier=h.item.tier, ref=_hit_ref(h.item.tier, h.item.ref),
                                              title=h.item.title, text=h.item.text, score=h.score, status=h.item.status,
                                              browsable=h.item.tier in TIERS) for h in hits])


def history(repos: Repos, *, tier: str | None = None, ref: str | None = None, actor: str | None = None,
            limit: int = 50, before_id: int | None = None) -> History:
    """Changes, newest first: of one row (tier + ref), one tier, or all."""
    if tier is not None:
        tier_of(tier)
    rows = repos.history.list(tier=tier, ref=ref, actor=actor, limit=limit, before_id=before_id)
    return History(tier=tier, ref=ref, changes=[Change(id=c.id, at=c.at, tier=c.tier, ref=c.ref, action=c.action,
                                                       actor=c.actor, before=c.before, after=c.after) for c in rows])


# ---- writing (as the human) ------------------------------------------------------------------------------------


def parse_edit(name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of an edit, checked against the tier's model (422 naming the field)."""
    tier = tier_of(name)
    if tier.edit_model is None:
        raise ServiceError(f"{tier.label.lower()} is not edited here (archive or delete it)", field="tier", status=405)
    try:
        edit = tier.edit_model.model_validate(dict(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or None
        message = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in exc.errors()[:5])
        raise ServiceError(message, field=where, status=422) from exc
    return edit.model_dump(exclude_unset=True)


def form_fields(name: str, form: Mapping[str, str]) -> dict[str, Any]:
    """A page's edit form as an edit body: lists from commas (or lines), yes/no, empty numbers left out."""
    body: dict[str, Any] = {}
    for spec in tier_of(name).fields:
        if spec.name not in form:
            continue
        value = str(form[spec.name])
        if spec.kind == "list":
            body[spec.name] = [part.strip() for part in value.split(",") if part.strip()]
        elif spec.kind == "lines":
            body[spec.name] = [line.strip() for line in value.splitlines() if line.strip()]
        elif spec.kind == "bool":
            body[spec.name] = value.lower() in ("true", "on", "1", "yes")
        elif (spec.optional or spec.kind in ("int", "float", "choice")) and not value.strip():
            continue
        else:
            body[spec.name] = value
    return body


def _refuse_value_error(exc: ValueError, field: str | None = None) -> ServiceError:
    return ServiceError(str(exc), field=field, status=422)


def edit(services: WebServices, name: str, ref: str, body: Mapping[str, Any]) -> Done:
    """A human's edit: only the given fields change; searchable tiers are re-indexed."""
    tier = tier_of(name)
    fields = parse_edit(name, body)
    with services.db.unit(actor="human") as repos:
        before = tier.one(repos, ref)
        if fields:
            try:
                tier.edit(repos, ref, fields, services)
            except NotFound as exc:
                raise NotFoundError(str(exc), field="ref") from exc
            except ValueError as exc:
                raise _refuse_value_error(exc) from exc
        record = tier.one(repos, ref)
    if tier.item_tier:
        _index(services)
    return Done(tier=name, ref=ref, changed=record != before, record=tier.actions(record))


def archive(services: WebServices, name: str, ref: str) -> Done:
    """Set a row aside: out of the persona's lists and retrieval, restorable."""
    tier = tier_of(name)
    if not tier.archivable:
        raise ServiceError(f"{tier.label.lower()} are not archived: edit or delete them", field="tier", status=409)
    with services.db.unit(actor="human") as repos:
        tier.one(repos, ref)
        changed = repos.kb.set_status(int(ref), "archived") if name == "kb" else \
            repos.archive(name, ref, services.clock())
        record = tier.one(repos, ref)
    _index(services)
    return Done(tier=name, ref=ref, changed=bool(changed), record=tier.actions(record))


def restore(services: WebServices, name: str, ref: str) -> Done:
    """Bring an archived row back (for core memory and the notepad: put a replaced version back)."""
    tier = tier_of(name)
    if not tier.archivable and not tier.versioned:
        raise ServiceError(f"{tier.label.lower()} are not archived, so not restored", field="tier", status=409)
    with services.db.unit(actor="human") as repos:
        tier.one(repos, ref)
        try:
            changed = repos.kb.set_status(int(ref), "active") if name == "kb" else repos.restore(name, ref)
        except ValueError as exc:
            raise ServiceError(str(exc), field="ref", status=409) from exc
        record = tier.one(repos, name if tier.versioned else ref)
    _index(services)
    return Done(tier=name, ref=record.ref, changed=bool(changed), record=tier.actions(record))


def delete(services: WebServices, name: str, ref: str) -> Done:
    """A human's delete: gone for good (its history stays)."""
    tier = tier_of(name)
    if tier.purge is None:
        raise ServiceError(f"{tier.label.lower()} is not deleted; edit it (empty clears it)", field="tier", status=405)
    with services.db.unit(actor="human") as repos:
        tier.one(repos, ref)
        tier.purge(repos, ref)
    _index(services)
    return Done(tier=name, ref=ref, changed=True)


# ---- the knowledge base ----------------------------------------------------------------------------------------


def _kind(filename: str, data: bytes) -> str | None:
    """The suffix ingestion reads the upload as, from its content: a PDF's magic bytes, or UTF-8 text."""
    if data.startswith(b"%PDF"):
        return ".pdf"
    if b"\x00" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return ".md" if filename.lower().endswith((".md", ".markdown")) else ".txt"


def _safe_stem(filename: str) -> str:
    stem = Path(filename.replace("\\", "/")).name.rsplit(".", 1)[0] if filename else ""
    return re.sub(r"[^\w.\- ]+", "_", stem).strip(" .")[:120] or "document"


def upload_kb(services: WebServices, filename: str, data: bytes) -> KBUploaded:
    """A document for the knowledge base (PDF, text or markdown, at most 20 MB): kept under the data dir, chunked,
    indexed. The same text twice is skipped."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ServiceError(f"the file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MB; split it or upload a smaller one",
                           field="file", status=413)
    if not data.strip():
        raise ServiceError("the file is empty", field="file", status=422)
    suffix = _kind(filename, data)
    if suffix is None:
        raise ServiceError("not a PDF or UTF-8 text/markdown file (checked by its content)", field="file", status=415)
    directory = Path(services.settings().data_dir).expanduser() / UPLOAD_DIR / hashlib.sha256(data).hexdigest()[:16]
    path = directory / f"{_safe_stem(filename)}{suffix}"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        with services.db.unit(actor="human") as repos:
            result = ingest(repos, path)
            doc = repos.kb.get(result.doc_id) if result.doc_id is not None else None
            title, chars = (doc.title, doc.chars) if doc is not None else (path.stem, 0)
    except KnowledgeError as exc:
        path.unlink(missing_ok=True)
        raise ServiceError(str(exc).replace(str(path), filename or "the file"), field="file", status=422) from exc
    if result.skipped and Path(result.path) == path and doc is not None and doc.path != str(path):
        path.unlink(missing_ok=True)
    indexed = 0 if result.skipped else _index(services, flush=True)
    return KBUploaded(doc_id=result.doc_id, title=title, chunks=result.chunks, chars=chars, skipped=result.skipped,
                      indexed=indexed)


@dataclass
class Page:
    """What the memory page shows: the tiers, the one open, its rows, the latest changes."""

    tiers: Tiers
    tier: Tier
    listing: MemoryList
    history: History
    fields: tuple[FieldInfo, ...] = field(default_factory=tuple)


def page(repos: Repos, services: WebServices, name: str, *, q: str | None = None, archived: bool = False) -> Page:
    tier = tier_of(name)
    return Page(tiers=tiers(repos), tier=tier, listing=list_tier(repos, services, name, q=q, archived=archived),
                history=history(repos, limit=20), fields=tier.fields)
