"""The memory manager (HMP "Memory Manager"): keeps retrieval lean without losing anything.

A pass runs every `every` ticks from the manage_memory step and applies three policies:

- **novelty**: the persona's own thoughts, diary entries and llm_memory entries that add little are archived.
  novelty = min(the novelty-score the tick gave it, 1 − redundancy, information). Information is distinct
  content words / 3, at most 1 ("Yes." or "ok, thanks" say nothing on their own). Redundancy is the highest,
  over the closest older live memories, of min(lexical containment, rescaled similarity): a repetition says
  the same thing (similar meaning) in mostly the same words (its content words contained in the other's).
  Rescaling maps cosine similarity from [similarity_floor, 1] to [0, 1]: with all-MiniLM-L6-v2 on the
  indexed text (author prefix included), paraphrases score about 0.85–0.97, different things said about one
  topic up to about 0.87 and unrelated texts under 0.4 (measured; bench/memory_manager.py).
  Archived when below the effective threshold.
- **LRU**: beyond `lru_limit` active entries of a tier in `lru_tiers`, the least recently used are archived
  (last use = last recalled, read or searched, else written).
- **emotion-weighted retention**: an entry's emotion score lowers its novelty bar by up to `emotion_weight`
  and lengthens its LRU life by up to `emotion_weight` of the tier's time span.

Modes: `standard`; `concentration` (goal-aware: memories sharing words or tags with an active goal are kept
more readily, by `goal_focus`, others less); `meditation` (goals ignored; redundancy is pruned harder, by
`diversity_boost`, so the diverse remain); `aggressive_pruning` (bar ×1.5, LRU limit ½, emotion weight ½);
`lenient_pruning` (bar ×½, LRU limit ×2, emotion weight ×1.5).

Never archived: the human's own words, knowledge-base chunks, abstracts, episodes, entities, insights,
pinned entries and the newest `grace_items` memories. Archived entries stay in SQL, leave retrieval, and
come back with memory.restore. Every decision is written to process_log (`memory.upkeep.manager`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field

from memory.clock import utcnow
from memory.models import MemoryItem
from memory.repositories import Repos
from memory.text import tokenize

Mode = Literal["standard", "concentration", "meditation", "aggressive_pruning", "lenient_pruning"]
MODES: tuple[str, ...] = get_args(Mode)
LRUTier = Literal["llm_memory", "diary", "concept"]  # the tiers whose entries may be pruned for age
NOVELTY_TIERS = ("message", "diary", "llm_memory")
INFORMATIVE_WORDS = 3


class ManagerSettings(BaseModel):
    """The `memory_manager` settings, as given by the run's settings object."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    mode: Mode = "standard"
    novelty_threshold: float = Field(0.35, ge=0, le=1)
    lru_limit: int = Field(500, ge=1, le=1_000_000)
    emotion_weight: float = Field(0.6, ge=0, le=1)
    goal_focus: float = Field(0.7, ge=0, le=1)
    diversity_boost: float = Field(0.8, ge=0, le=1)
    log_decisions: bool = True
    every: int = Field(10, ge=0, description="ticks between passes; 0 = never")
    lru_tiers: list[LRUTier] = Field(default_factory=lambda: list(get_args(LRUTier)))
    grace_items: int = Field(20, ge=0)
    similarity_floor: float = Field(0.6, ge=0, le=1)
    max_per_pass: int = Field(200, ge=1)

    def effective(self) -> ManagerSettings:
        """The parameters after the mode has shaped them (a copy: the shaped values may exceed the bounds a
        person may set, e.g. lenient pruning doubles the LRU limit)."""
        if self.mode == "aggressive_pruning":
            shaped = {
                "novelty_threshold": min(0.9, self.novelty_threshold * 1.5),
                "lru_limit": max(1, self.lru_limit // 2),
                "emotion_weight": self.emotion_weight / 2,
            }
        elif self.mode == "lenient_pruning":
            shaped = {
                "novelty_threshold": self.novelty_threshold / 2,
                "lru_limit": self.lru_limit * 2,
                "emotion_weight": min(1.0, self.emotion_weight * 1.5),
            }
        elif self.mode == "meditation":
            shaped = {
                "novelty_threshold": min(0.9, self.novelty_threshold * (1 + 0.5 * self.diversity_boost)),
                "goal_focus": 0.0,
            }
        elif self.mode == "concentration":
            shaped = {}
        else:
            shaped = {"goal_focus": 0.0}
        return self.model_copy(update=shaped)


@dataclass
class Decision:
    item_id: int
    tier: str
    ref: str
    action: str  # archived | kept
    policy: str  # novelty | lru
    reason: str


@dataclass
class PassReport:
    assessed: int = 0
    decisions: list[Decision] = field(default_factory=list)

    @property
    def archived(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == "archived"]

    def summary(self) -> str:
        kept = len(self.decisions) - len(self.archived)
        by_policy: dict[str, int] = {}
        for d in self.archived:
            by_policy[d.policy] = by_policy.get(d.policy, 0) + 1
        parts = ", ".join(f"{n} by {p}" for p, n in sorted(by_policy.items())) or "none"
        return f"assessed {self.assessed}; archived {len(self.archived)} ({parts}); kept {kept} by emotion or goal" + (
            "; restore with memory.restore {tier, ref}" if self.archived else ""
        )


def set_memory_status(repos: Repos, tier: str, ref: str | int, status: str, now: datetime | None = None) -> bool:
    """Archive (`archived`) or restore (`active`) one memory through `Repos.archive` / `Repos.restore`."""
    if status == "archived":
        return repos.archive(tier, ref, now or utcnow())
    if status == "active":
        return repos.restore(tier, ref)
    raise ValueError(f"a memory is archived or active, not {status!r}")


def information(text: str) -> float:
    return min(1.0, len(set(tokenize(text))) / INFORMATIVE_WORDS)


def _goal_words(repos: Repos) -> tuple[set[str], set[str]]:
    goals = repos.goals.list(status="active", limit=20)
    words = set(tokenize(" ".join(f"{g.title} {g.description or ''}" for g in goals)))
    tags = {str(t).lower() for g in goals for t in g.tags or []}
    return words, tags


def _goal_related(item: MemoryItem, goal_words: set[str], goal_tags: set[str]) -> bool:
    if goal_tags & {str(t).lower() for t in item.tags or []}:
        return True
    return len(goal_words & set(tokenize(item.text))) >= 2


class Neighbours(Protocol):
    """What novelty needs of the memory index (memory/retrieval/index.py `MemoryIndex`)."""

    def closest_older(self, item_ids: list[int]) -> dict[int, list[tuple[float, int]]]: ...


def assess(repos: Repos, index: Neighbours | None, *, upto_id: int, limit: int, floor: float = 0.6) -> list[MemoryItem]:
    """Give the novelty of items not yet assessed (id order, up to `upto_id`); the cursor moves past them."""
    cursor = repos.config.memory_manager_cursor
    batch = repos.items.novelty_candidates(cursor, upto_id, NOVELTY_TIERS, limit)
    if not batch:
        repos.config.memory_manager_cursor = max(cursor, upto_id)
        return []
    closest = index.closest_older([i.id for i in batch]) if index is not None else {}
    others = repos.items.many({other for pairs in closest.values() for _, other in pairs})
    for item in batch:
        words = set(tokenize(item.text))
        redundancy, similar, similarity = 0.0, None, 0.0
        for sim, other in closest.get(item.id, []):
            if other not in others or not words:
                continue
            contained = len(words & set(tokenize(others[other].text))) / len(words)
            repeated = min(contained, max(0.0, sim - floor) / (1.0 - floor) if floor < 1 else 0.0)
            if similar is None or repeated > redundancy:
                redundancy, similar, similarity = repeated, other, sim
        stored = item.novelty if item.novelty is not None else 1.0
        item.novelty = round(max(0.0, min(stored, 1.0 - redundancy, information(item.text))), 4)
        item.meta = {
            **(item.meta or {}),
            "similar_to": similar,
            "similarity": round(similarity, 4),
            "redundancy": round(redundancy, 4),
        }
    repos.config.memory_manager_cursor = batch[-1].id if len(batch) == limit else max(cursor, upto_id)
    return batch


def novelty_bar(item: MemoryItem, cfg: ManagerSettings, related: bool) -> float:
    bar = cfg.novelty_threshold * (1 - cfg.emotion_weight * min(1.0, item.emotion_score or 0.0))
    if cfg.goal_focus:
        bar *= (1 - cfg.goal_focus) if related else (1 + 0.5 * cfg.goal_focus)
    return min(0.95, bar)


def _label(repos: Repos, item_id: int | None) -> str:
    other = repos.items.get(item_id) if item_id else None
    return f"{other.tier} {other.ref}" if other is not None else "nothing"


def prune_by_novelty(repos: Repos, cfg: ManagerSettings, report: PassReport, goal: tuple[set[str], set[str]]) -> None:
    cursor = repos.config.memory_manager_cursor
    ceiling = min(0.95, cfg.novelty_threshold * (1 + 0.5 * cfg.goal_focus))  # no item's bar is higher
    rows = repos.items.novelty_below(ceiling, cursor, NOVELTY_TIERS)
    base = cfg.novelty_threshold
    for item in rows:
        if len(report.archived) >= cfg.max_per_pass:
            break
        related = _goal_related(item, *goal) if cfg.goal_focus else False
        bar = novelty_bar(item, cfg, related)
        similar = (item.meta or {}).get("similar_to")
        novelty = item.novelty
        if novelty is None:  # (novelty_below reads judged items only)
            continue
        why = (
            f"novelty {item.novelty:.2f} (closest: {_label(repos, similar)}, similarity "
            f"{(item.meta or {}).get('similarity', 0):.2f}, redundancy {(item.meta or {}).get('redundancy', 0):.2f}; "
            f"information {information(item.text):.2f})"
        )
        if novelty < bar:
            set_memory_status(repos, item.tier, item.ref, "archived")
            report.decisions.append(
                Decision(item.id, item.tier, item.ref, "archived", "novelty", f"{why} < bar {bar:.2f}")
            )
        elif novelty < base and (item.meta or {}).get("kept_at_bar") != round(bar, 4):
            cause = "goal-related" if related and cfg.goal_focus else f"emotion {item.emotion_score:.2f}"
            item.meta = {**(item.meta or {}), "kept_at_bar": round(bar, 4)}  # logged once per bar, not every pass
            report.decisions.append(
                Decision(
                    item.id,
                    item.tier,
                    item.ref,
                    "kept",
                    "novelty",
                    f"{why} under the threshold {base:.2f}, but {cause} lowers its bar to {bar:.2f}",
                )
            )


def _timestamp(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def prune_by_lru(repos: Repos, cfg: ManagerSettings, report: PassReport, goal: tuple[set[str], set[str]]) -> None:
    for tier in cfg.lru_tiers:
        count = repos.items.count_active_unpinned(tier)
        excess = min(count - cfg.lru_limit, cfg.max_per_pass - len(report.archived))
        if excess <= 0:
            continue
        rows = repos.items.active_unpinned(tier)
        last_use = {
            r.id: max(_timestamp(r.last_accessed_at), _timestamp(r.updated_at), _timestamp(r.created_at)) for r in rows
        }
        span = max(last_use.values()) - min(last_use.values()) or 1.0
        life: dict[int, float] = {}
        for r in rows:
            bonus = cfg.emotion_weight * min(1.0, r.emotion_score or 0.0) + 0.5 * (r.importance - 0.5)
            if cfg.goal_focus and _goal_related(r, *goal):
                bonus += cfg.goal_focus
            life[r.id] = last_use[r.id] + bonus * span
        by_id = {r.id: r for r in rows}
        for item_id in sorted(life, key=life.__getitem__)[:excess]:
            item = by_id[item_id]
            used = datetime.fromtimestamp(last_use[item_id]).strftime("%Y-%m-%d %H:%M")
            set_memory_status(repos, item.tier, item.ref, "archived")
            report.decisions.append(
                Decision(
                    item.id,
                    tier,
                    item.ref,
                    "archived",
                    "lru",
                    f"{count} active {tier} entries > limit {cfg.lru_limit}; last used {used}, "
                    f"used {item.access_count} times",
                )
            )


# `index`: Neighbours or None; Any while the tick holds it as a RecallIndex, which does not declare `closest_older`
def run_pass(repos: Repos, index: Any, cfg: ManagerSettings, *, thread_id: str | None = None) -> PassReport:
    """One pass of every policy under `cfg` (as shaped by its mode), logged to process_log."""
    effective = cfg.effective()
    report = PassReport()
    newest = repos.items.newest_id()
    report.assessed = len(
        assess(
            repos,
            index,
            upto_id=newest - effective.grace_items,
            limit=effective.max_per_pass * 5,
            floor=effective.similarity_floor,
        )
    )
    goal = _goal_words(repos) if effective.goal_focus else (set(), set())
    prune_by_novelty(repos, effective, report, goal)
    prune_by_lru(repos, effective, report, goal)
    if effective.log_decisions:
        for d in report.decisions:
            repos.processes.add(
                "memory.upkeep.manager",
                f"{d.action} {d.tier} {d.ref} ({d.policy}): {d.reason}",
                status="close",
                thread_id=thread_id,
                tags=["memory", d.policy, d.action],
            )
    settings = (
        f"mode {effective.mode}: novelty bar {effective.novelty_threshold:.2f}, LRU limit {effective.lru_limit}, "
        f"emotion weight {effective.emotion_weight:.2f}, goal focus {effective.goal_focus:.2f}"
    )
    if report.decisions or report.assessed:
        repos.processes.add(
            "memory.upkeep.manager",
            f"{report.summary()} [{settings}]",
            status="ok" if report.archived else "close",
            thread_id=thread_id,
            tags=["memory"],
        )
    return report
