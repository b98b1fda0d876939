"""The `config` table: JSON values by key (cycle settings, the persona's own changes, durable requests).

Every key is named here and only here: the rest of the code reads and writes the table through the typed
accessors below (`repos.config.persona_dir`, `repos.config.llm_overrides()`, `repos.config.cycle(thread_id)` …);
`tests/unit/test_architecture.py` checks that no other module calls `get`/`set` on it or spells a key.

A unit of work remembers the rows it has read (and the keys it found absent), so a key read twice in one
transaction — or loaded beforehand with `preload`, several keys in one query — costs no second statement.

A tick reads the same few keys in several of its steps' units (the run choices, the drives' pointers, the thread's
cycle, the emotion words, the memory step's keys): its first step reads them all in one query (`preload_tick`) into
the run's `ConfigSnapshot` (memory/db.py gives each unit of a graph run the run's one), and the later units of the
tick take them from there instead of reading them again. The tick therefore sees every change made before it
started; a key the tick itself writes (any unit of the run) leaves the snapshot at once, so the units after read
it from the database again and see the write once it is committed (a rolled-back write: the value as it was).
Only the keys `preload_tick` read are ever served from it: the loop's control, the wake request and the rest are
read from the table every time.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from sqlalchemy import Insert, Select, Update, bindparam, insert, or_, select, update
from sqlalchemy.orm import Session

from memory.clock import utcnow
from memory.models import ConfigEntry
from memory.repositories.base import Repo, insert_values, prepared, table_of


@prepared
def _keys(count: int, prefixes: tuple[str, ...]) -> Select[str, Any]:
    """`count` keys (bound as `key0`, `key1`, …), and every key under `prefixes` (a few fixed prefixes: one statement
    for each set of them). A fixed number of bound keys rather than an expanding IN, which SQLAlchemy re-renders on
    every execution. Core, as the writes below: the table is read and written by key, never as objects (and is no
    memory history)."""
    c = table_of(ConfigEntry).c
    wanted = [c.key.in_([bindparam(f"key{i}") for i in range(count)])] if count else []
    return select(c.key, c.value).where(or_(*wanted, *(c.key.startswith(p, autoescape=True) for p in prefixes)))


@prepared
def _insert_entry() -> Insert:
    return insert(table_of(ConfigEntry))


@prepared
def _update_entry() -> Update:
    table = table_of(ConfigEntry)
    return (
        update(table)
        .where(table.c.key == bindparam("entry_key"))
        .values(value=bindparam("new_value"), updated_at=bindparam("at"))
    )


@dataclass
class Entry:
    """A key's value as this unit of work read or wrote it."""

    key: str
    value: Any


TICK_SNAPSHOT = "config_snapshot"  # session.info: the run's ConfigSnapshot (memory/db.py puts it there)


class ConfigSnapshot:
    """The keys a tick's first step read for the whole tick (module doc): key -> its row (None: absent; a row may
    hold a JSON null), and the prefixes whose every key it holds. A key written by any unit of the run leaves it for
    good (and so does every
    prefix over it): the units after read it from the table. Units of one run may run in several threads."""

    def __init__(self) -> None:
        self._rows: dict[str, Entry | None] = {}
        self._prefixes: set[str] = set()
        self._written: set[str] = set()
        self._lock = threading.Lock()

    def fill(self, rows: Mapping[str, Entry | None], prefixes: Iterable[str]) -> None:
        """What `preload_tick` read (a key written meanwhile stays out, as does a prefix over it)."""
        with self._lock:
            for key, row in rows.items():
                if key not in self._written:
                    self._rows.setdefault(key, None if row is None else Entry(key, copy.deepcopy(row.value)))
            self._prefixes.update(p for p in prefixes if not any(k.startswith(p) for k in self._written))

    def give(self, keys: Iterable[str], prefixes: Iterable[str]) -> tuple[dict[str, Entry | None], set[str]]:
        """The `keys` it holds and, for the `prefixes` it holds whole, every key under them: key -> a copy of its
        row (a unit may change a value it was given before writing it back); and the prefixes it held."""
        with self._lock:
            held = {p for p in prefixes if p in self._prefixes}
            found = {key: self._rows[key] for key in keys if key in self._rows}
            found.update(
                (key, row) for key, row in self._rows.items() if row is not None and key.startswith(tuple(held))
            )
        return {key: None if row is None else Entry(key, copy.deepcopy(row.value)) for key, row in found.items()}, held

    def forget(self, key: str) -> None:
        """A unit of the run wrote `key`: from now on it is read from the table."""
        with self._lock:
            self._written.add(key)
            self._rows.pop(key, None)
            self._prefixes = {p for p in self._prefixes if not key.startswith(p)}


# ---- the keys (nowhere else) ---------------------------------------------------------------------------------
# the persona's own database on a `chroma run` server outside a deployment (a deployment names it by the persona's
# schema): made on first use, never inherited by a spawned child (memory/repositories/transfer.py)
VECTOR_DATABASE_KEY = "vectors/chroma_database"
PERSONA_DIR_KEY = "run/persona_dir"  # the persona directory the data dir was last run with (or adopted, web/)
LLM_SELECTED_KEY = "llm/selected"  # the primary model chosen at run time (managers / nodes/commands/llm_registry.py)
LLM_OVERRIDE_PREFIX = "llm/overrides/"  # + model id: its priority / enabled / is_validator chosen at run time
LLM_ADDED_PREFIX = "llm/added/"  # + model id: a model added at run time (its registry entry; a key only by file path)
SELF_CHANGE_PREFIX = "persona/"  # + dotted setting: the persona's own setting changes (config.update)
SESSION_REVIVED_PREFIX = "session/revived/"  # + thread id: the session a revived thread continues
FETCH_NOW_KEY = "feeds/fetch_now"  # the world check asks the loop to fetch every feed now
LOOP_CONTROL_KEY = "run/control"  # {"want": running|paused|stopped, "by", "at"}: what the human asked for
WAKE_REQUEST_KEY = "run/wake"  # {"by", "at"}: the human asked a dreaming persona to wake up (Controls → Wake up)
LOOP_STATUS_KEY = "run/status"  # {"state": running|paused|idle|stopped, "pid", "thread", "tick", "at"}: the loop
PLAYBOOK_RUN_PREFIX = "run/"  # + "<thread>/<playbook>": a one-shot playbook's run (graph/agent.py)
REACH_OUT_KEY = "drives/reach_outs"  # the offers made: [{at, tick, thread, drive, level}], newest last
ADJUSTMENTS_KEY = "drives/adjustments"  # the human's settings in force: {drive: {level, at, by}}
ADJUSTMENT_HISTORY_KEY = "drives/adjustment_history"  # every change: [{drive, level, at, by, computed}], newest last
EMOTION_POINTER_KEY = "drives/emotion_note_id"  # the last human note whose emotion was logged
RESOLUTION_POINTER_KEY = "drives/resolution_note_id"  # the last human note whose conversation was checked
VAULT_FILES_KEY = "vault/files"  # the watched folder's notes: "<folder>::<path>" -> [mtime_ns, size, kb document]
SESSION_EXPORT_PREFIX = "exports/session-"  # + session id: where an export job leaves its result (fleet)
PERSONA_EDITS_KEY = "human/persona_edits"  # the human's edits of persona files, newest last (the page shows them)
ACTIVE_THREAD_PREFIX = "stelis/active/"  # + root thread id: the thread its ticks run in
DREAM_APPLIED_KEY = "dreams/last_applied"  # {run, outcome} of the last dream run whose answer was applied
DREAM_ATTEMPT_KEY = "dreams/last_attempt"  # when the persona last began a dream (applied or not)
DREAM_MESSAGE_KEY = "dreams/last_message_id"  # the newest message a dream has seen
EPISODES_CHECKED_KEY = "memory/episodes_checked_on"  # the local date on which nothing more was missing
EMOTIONS_KEY = "emotions"  # the emotion vocabulary as the persona extended it
CYCLE_PREFIX = "cycle/"  # + thread id: the thread's cycle settings (pause, notes mode, loaded skills …)
THINKING_PREFIX = "thinking:"  # + thread id: when the thread last thought, its quiet streak (managers/thinking.py)
MCP_TOOLS_PREFIX = "mcp/tools/"  # + server name: the tools last seen there
LINEAGE_PARENT_KEY = "lineage/parent"  # a spawned child's parent
LINEAGE_CHILDREN_KEY = "lineage/children"  # a parent's spawned children
MEMORY_MANAGER_CURSOR_KEY = "memory/manager_cursor"  # the last memory the memory manager looked at
FOLLOW_UP_CURSOR_KEY = "vectors/follow_up_cursor"  # the last memory the index's follow-up saw (memory/followup.py)
ABSTRACT_REQUEST_PREFIX = "memory/abstract_request/"  # + thread id: a pending request for an abstract
MESH_DISCOVERED_KEY = "mesh/discovered"  # before v28: DIDs proven on the mesh, not added (now peers met: the migration)
MESH_CONNECTIVITY_KEY = (
    "mesh/connectivity"  # {"isolated", "since", "peers", "door", "isolated_since"}: as the door saw it
)
NOT_INHERITED_PREFIXES = (
    "run/",
    "lineage/",
    "session/",
    "feeds/",
    "vectors/",
    "mesh/",
)  # a spawned child does not take
# the parent's run, family, bookkeeping and where its vectors live
_DRIVE_KEYS = (EMOTION_POINTER_KEY, RESOLUTION_POINTER_KEY, REACH_OUT_KEY, ADJUSTMENTS_KEY)  # preload_drives
KEYS = tuple(value for name, value in list(globals().items()) if name.endswith(("_KEY", "_PREFIX")))


def inherited_by_child(key: str, *, trained: bool) -> bool:
    """Whether a spawned child takes the parent's row `key` (memory/repositories/transfer.py): not the parent's run,
    family or bookkeeping; a "trained" child only the persona's own tuned settings."""
    if key.startswith(NOT_INHERITED_PREFIXES):
        return False
    return not trained or key.startswith(SELF_CHANGE_PREFIX)


class ConfigRepo(Repo):
    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._rows: dict[str, Entry | None] = {}  # this transaction's reads and writes: key -> entry (None: absent)
        self._prefixes: set[str] = set()  # prefixes whose every key is in `_rows`
        self._snapshot: ConfigSnapshot | None = session.info.get(TICK_SNAPSHOT)  # the tick's (module doc)
        self._given: set[str] = set()  # keys in `_rows` the snapshot gave (read before this transaction)

    def _row(self, key: str) -> Entry | None:
        if key not in self._rows:
            self.preload(key)
        return self._rows[key]

    def preload(self, *keys: str, prefixes: tuple[str, ...] = ()) -> None:
        """Read these keys (and every key under `prefixes`) in one query; later `get`s of them cost nothing."""
        wanted = [key for key in keys if key not in self._rows]
        prefixes = tuple(p for p in prefixes if p not in self._prefixes)
        if self._snapshot is not None and (wanted or prefixes):
            found, held = self._snapshot.give(wanted, prefixes)
            self._rows.update(found)
            self._given.update(found)
            self._prefixes.update(held)
            wanted = [key for key in wanted if key not in found]
            prefixes = tuple(p for p in prefixes if p not in held)
        if not wanted and not prefixes:
            return
        bound = {f"key{i}": key for i, key in enumerate(wanted)}
        for key, value in self.core(_keys(len(wanted), prefixes), bound).all():
            self._rows[key] = Entry(key, value)
        for key in wanted:
            self._rows.setdefault(key, None)
        self._prefixes.update(prefixes)

    def get(self, key: str, default: Any = None) -> Any:
        row = self._row(key)
        return default if row is None else row.value

    def set(self, key: str, value: Any) -> None:
        row = self._row(key)
        if key in self._given:  # read before this transaction: whether the row is there and what it holds, now
            self._given.discard(key)
            self._rows.pop(key, None)
            self._snapshot_forget(key)
            row = self._row(key)
        if row is None:
            self.core(_insert_entry(), insert_values(ConfigEntry, {"key": key, "value": value}))
            self._rows[key] = Entry(key, value)
        elif row.value == value:
            return
        else:
            self.core(_update_entry(), {"entry_key": key, "new_value": value, "at": utcnow()})
            row.value = value
        self._snapshot_forget(key)

    def _snapshot_forget(self, key: str) -> None:
        if self._snapshot is not None:
            self._snapshot.forget(key)

    def many(self, *keys: str) -> dict[str, Any]:
        """Several keys in one query (absent ones are None)."""
        self.preload(*keys)
        return {key: self.get(key) for key in keys}

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Every key starting with `prefix` (e.g. the persona's own setting changes, `persona/…`)."""
        self.preload(prefixes=(prefix,))
        return {
            key: row.value
            for key, row in self._rows.items()
            if key.startswith(prefix) and row is not None and row.value is not None
        }

    def all(self) -> dict[str, Any]:
        return {row.key: row.value for row in self.session.scalars(select(ConfigEntry)).all()}

    def _dict(self, key: str) -> dict[str, Any] | None:
        value = self.get(key)
        return value if isinstance(value, dict) else None

    def _str(self, key: str) -> str | None:
        value = self.get(key)
        return value if isinstance(value, str) else None

    def _int(self, key: str) -> int | None:
        value = self.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _list(self, key: str) -> list[Any] | None:
        value = self.get(key)
        return value if isinstance(value, list) else None

    # ---- typed accessors: one per key or key family ----------------------------------------------------------

    @property
    def persona_dir(self) -> str | None:
        """The persona directory this data dir was last run with (or adopted by the web app)."""
        return self._str(PERSONA_DIR_KEY)

    @persona_dir.setter
    def persona_dir(self, value: str | None) -> None:
        self.set(PERSONA_DIR_KEY, value)

    @property
    def selected_llm(self) -> str | None:
        """The primary model chosen at run time (None: by priority)."""
        return self._str(LLM_SELECTED_KEY)

    @selected_llm.setter
    def selected_llm(self, value: str | None) -> None:
        self.set(LLM_SELECTED_KEY, value)

    def llm_overrides(self) -> dict[str, dict[str, Any]]:
        """Model id -> its priority / enabled / is_validator chosen at run time."""
        return {k.removeprefix(LLM_OVERRIDE_PREFIX): v for k, v in self.with_prefix(LLM_OVERRIDE_PREFIX).items()}

    def set_llm_override(self, llm_id: str, value: dict[str, Any] | None) -> None:
        self.set(LLM_OVERRIDE_PREFIX + llm_id, value)

    def added_llms(self) -> dict[str, dict[str, Any]]:
        """Model id -> the registry entry of a model added at run time (Controls, `run.py llm add`, the API)."""
        return {k.removeprefix(LLM_ADDED_PREFIX): v for k, v in self.with_prefix(LLM_ADDED_PREFIX).items() if v}

    def set_added_llm(self, llm_id: str, entry: dict[str, Any] | None) -> None:
        """Record (or, None, forget) a model added at run time."""
        self.set(LLM_ADDED_PREFIX + llm_id, entry)

    def self_changes(self) -> dict[str, Any]:
        """The persona's own setting changes (config.update), dotted keys."""
        return {k.removeprefix(SELF_CHANGE_PREFIX): v for k, v in self.with_prefix(SELF_CHANGE_PREFIX).items()}

    def set_self_change(self, dotted: str, value: Any) -> None:
        self.set(SELF_CHANGE_PREFIX + dotted, value)

    def preload_run_choices(self, *, active_root: str | None = None) -> None:
        """What a reload reads (persona dir, chosen model, the persona's own changes, model overrides) — and, with
        `active_root`, the thread that root's ticks run in — in one query."""
        keys = (PERSONA_DIR_KEY, LLM_SELECTED_KEY) + ((ACTIVE_THREAD_PREFIX + active_root,) if active_root else ())
        self.preload(*keys, prefixes=(SELF_CHANGE_PREFIX, LLM_OVERRIDE_PREFIX, LLM_ADDED_PREFIX))

    def preload_tick(self, root_id: str) -> None:
        """What a tick's steps read (the run choices, the thread the root's ticks run in, the drives' keys, the
        root's cycle and abstract request, the emotion words, the episode check, whether the mesh is reachable), in
        one query, kept for the rest of the tick in the run's snapshot (module doc)."""
        keys = (
            PERSONA_DIR_KEY,
            LLM_SELECTED_KEY,
            ACTIVE_THREAD_PREFIX + root_id,
            *_DRIVE_KEYS,
            CYCLE_PREFIX + root_id,
            EMOTIONS_KEY,
            ABSTRACT_REQUEST_PREFIX + root_id,
            EPISODES_CHECKED_KEY,
            MESH_CONNECTIVITY_KEY,
        )
        prefixes = (SELF_CHANGE_PREFIX, LLM_OVERRIDE_PREFIX, LLM_ADDED_PREFIX)
        self.preload(*keys, prefixes=prefixes)
        if self._snapshot is not None:
            self._snapshot.fill(
                {key: row for key, row in self._rows.items() if key in keys or key.startswith(prefixes)}, prefixes
            )

    def preload_tick_decision(self, thread_id: str) -> None:
        """What decides whether a thread thinks now (the loop control, a feeds check asked for, its cycle), in one
        query."""
        self.preload(LOOP_CONTROL_KEY, FETCH_NOW_KEY, CYCLE_PREFIX + thread_id)

    def revived_from(self, thread_id: str) -> int | None:
        """The session a revived thread continues."""
        return self._int(SESSION_REVIVED_PREFIX + thread_id)

    def set_revived_from(self, thread_id: str, session_id: int | None) -> None:
        self.set(SESSION_REVIVED_PREFIX + thread_id, session_id)

    def revived_threads(self) -> dict[str, int]:
        """Thread id -> the session it continues, for every revived thread."""
        return {k.removeprefix(SESSION_REVIVED_PREFIX): v for k, v in self.with_prefix(SESSION_REVIVED_PREFIX).items()}

    @property
    def fetch_now(self) -> bool:
        """The world check asked the loop to fetch every feed now."""
        return bool(self.get(FETCH_NOW_KEY))

    @fetch_now.setter
    def fetch_now(self, value: bool | None) -> None:
        self.set(FETCH_NOW_KEY, value or None)

    @property
    def loop_control(self) -> dict[str, Any] | None:
        """What the human asked of the loop: {want, by, at}."""
        return self._dict(LOOP_CONTROL_KEY)

    @loop_control.setter
    def loop_control(self, value: dict[str, Any] | None) -> None:
        self.set(LOOP_CONTROL_KEY, value)

    @property
    def wake_request(self) -> dict[str, Any] | None:
        """The human's last "Wake up": {by, at}."""
        return self._dict(WAKE_REQUEST_KEY)

    @wake_request.setter
    def wake_request(self, value: dict[str, Any] | None) -> None:
        self.set(WAKE_REQUEST_KEY, value)

    @property
    def loop_status(self) -> dict[str, Any] | None:
        """What the loop does: {state, pid, thread, tick, at}."""
        return self._dict(LOOP_STATUS_KEY)

    @loop_status.setter
    def loop_status(self, value: dict[str, Any] | None) -> None:
        self.set(LOOP_STATUS_KEY, value)

    def playbook_run(self, thread_id: str, playbook: str) -> Any:
        """A one-shot playbook's run on a thread, as stored: {run_id, status, inputs} (managers/loop.py reads it as a
        record; None: never ran)."""
        return copy.deepcopy(self.get(f"{PLAYBOOK_RUN_PREFIX}{thread_id}/{playbook}"))

    def set_playbook_run(self, thread_id: str, playbook: str, value: dict[str, Any] | None) -> None:
        self.set(f"{PLAYBOOK_RUN_PREFIX}{thread_id}/{playbook}", value)

    def thinking_state(self, thread_id: str) -> Any:
        """When the thread last thought and its quiet streak, as stored (managers/thinking.py reads it as a record;
        None: never)."""
        return copy.deepcopy(self.get(THINKING_PREFIX + thread_id))

    def set_thinking_state(self, thread_id: str, value: dict[str, Any]) -> None:
        self.set(THINKING_PREFIX + thread_id, value)

    @property
    def reach_outs(self) -> list[dict[str, Any]]:
        """The drives' offers to reach out, newest last."""
        return list(self.get(REACH_OUT_KEY) or [])

    @reach_outs.setter
    def reach_outs(self, value: Sequence[Mapping[str, Any]] | None) -> None:
        self.set(REACH_OUT_KEY, None if value is None else [dict(offer) for offer in value])

    @property
    def drive_adjustments(self) -> dict[str, Any]:
        """The human's drive settings in force: {drive: {level, at, by}}."""
        return dict(self.get(ADJUSTMENTS_KEY) or {})

    @drive_adjustments.setter
    def drive_adjustments(self, value: dict[str, Any] | None) -> None:
        self.set(ADJUSTMENTS_KEY, value)

    @property
    def drive_adjustment_history(self) -> list[dict[str, Any]]:
        """Every change of a drive by the human, newest last."""
        return list(self.get(ADJUSTMENT_HISTORY_KEY) or [])

    @drive_adjustment_history.setter
    def drive_adjustment_history(self, value: list[dict[str, Any]] | None) -> None:
        self.set(ADJUSTMENT_HISTORY_KEY, value)

    @property
    def emotion_note_pointer(self) -> int:
        """The last human note whose emotion was logged (0: none)."""
        return int(self.get(EMOTION_POINTER_KEY) or 0)

    @emotion_note_pointer.setter
    def emotion_note_pointer(self, value: int | None) -> None:
        self.set(EMOTION_POINTER_KEY, value)

    @property
    def resolution_note_pointer(self) -> int:
        """The last human note whose conversation was checked (0: none)."""
        return int(self.get(RESOLUTION_POINTER_KEY) or 0)

    @resolution_note_pointer.setter
    def resolution_note_pointer(self, value: int | None) -> None:
        self.set(RESOLUTION_POINTER_KEY, value)

    def preload_drives(self) -> None:
        """The keys the drives step reads, in one query."""
        self.preload(*_DRIVE_KEYS)

    @property
    def vault_files(self) -> dict[str, Any]:
        """What the vault sync saw of each note (managers/vault.py)."""
        return dict(self.get(VAULT_FILES_KEY) or {})

    @vault_files.setter
    def vault_files(self, value: dict[str, Any]) -> None:
        self.set(VAULT_FILES_KEY, value)

    def session_export(self, session_id: int) -> dict[str, Any] | None:
        """The result an export job left for `session_id` (fleet)."""
        return self._dict(f"{SESSION_EXPORT_PREFIX}{session_id}")

    def set_session_export(self, session_id: int, value: dict[str, Any] | None) -> None:
        self.set(f"{SESSION_EXPORT_PREFIX}{session_id}", value)

    @property
    def persona_edits(self) -> Any:
        """The human's edits of persona files, newest last, as stored (managers/persona.py reads them as records)."""
        return copy.deepcopy(self.get(PERSONA_EDITS_KEY))

    @persona_edits.setter
    def persona_edits(self, value: list[dict[str, Any]] | None) -> None:
        self.set(PERSONA_EDITS_KEY, value)

    def active_thread(self, root_id: str) -> str | None:
        """The thread a root's ticks run in (None: the root itself)."""
        return self._str(ACTIVE_THREAD_PREFIX + root_id)

    def set_active_thread(self, root_id: str, thread_id: str | None) -> None:
        self.set(ACTIVE_THREAD_PREFIX + root_id, thread_id)

    @property
    def last_applied_dream(self) -> Any:
        """{run, outcome} of the last dream run whose answer was applied, as stored (managers/dreams.py reads it as a
        record)."""
        return copy.deepcopy(self.get(DREAM_APPLIED_KEY))

    @last_applied_dream.setter
    def last_applied_dream(self, value: dict[str, Any] | None) -> None:
        self.set(DREAM_APPLIED_KEY, value)

    @property
    def last_dream_attempt(self) -> str | None:
        """When (ISO time) the persona last began a dream."""
        return self._str(DREAM_ATTEMPT_KEY)

    @last_dream_attempt.setter
    def last_dream_attempt(self, value: str | None) -> None:
        self.set(DREAM_ATTEMPT_KEY, value)

    @property
    def last_dream_message(self) -> int:
        """The newest message a dream has seen (0: none)."""
        return int(self.get(DREAM_MESSAGE_KEY) or 0)

    @last_dream_message.setter
    def last_dream_message(self, value: int | None) -> None:
        self.set(DREAM_MESSAGE_KEY, value)

    @property
    def episodes_checked_on(self) -> str | None:
        """The local date (ISO) on which no episode was missing."""
        return self._str(EPISODES_CHECKED_KEY)

    @episodes_checked_on.setter
    def episodes_checked_on(self, value: str | None) -> None:
        self.set(EPISODES_CHECKED_KEY, value)

    @property
    def emotion_vocabulary(self) -> list[str] | None:
        """The emotion words as the persona extended them (None: the settings' own)."""
        value = self.get(EMOTIONS_KEY)
        return None if value is None else list(value)

    @emotion_vocabulary.setter
    def emotion_vocabulary(self, value: list[str] | None) -> None:
        self.set(EMOTIONS_KEY, value)

    def cycle(self, thread_id: str) -> Any:
        """A thread's cycle settings as stored (pause, notes mode, loaded skills …; a copy, {} when absent) — or
        whatever else the row holds: managers/loop.py reads it as a record, whatever it is."""
        value = self.get(CYCLE_PREFIX + thread_id)
        return {} if value is None else dict(value) if isinstance(value, dict) else value

    def set_cycle(self, thread_id: str, value: dict[str, Any]) -> None:
        self.set(CYCLE_PREFIX + thread_id, value)

    def mcp_tools(self, server: str) -> list[dict[str, Any]] | None:
        """The tools last seen on an MCP server (None: never listed)."""
        return self._list(MCP_TOOLS_PREFIX + server)

    def set_mcp_tools(self, server: str, tools: list[dict[str, Any]] | None) -> None:
        self.set(MCP_TOOLS_PREFIX + server, tools)

    @property
    def lineage_parent(self) -> dict[str, Any] | None:
        """A spawned child's parent: {name, mode, …}."""
        parent: dict[str, Any] | None = self.get(LINEAGE_PARENT_KEY)
        return parent

    @lineage_parent.setter
    def lineage_parent(self, value: dict[str, Any] | None) -> None:
        self.set(LINEAGE_PARENT_KEY, value)

    @property
    def lineage_children(self) -> list[dict[str, Any]]:
        """A parent's spawned children."""
        return list(self.get(LINEAGE_CHILDREN_KEY) or [])

    @lineage_children.setter
    def lineage_children(self, value: list[dict[str, Any]] | None) -> None:
        self.set(LINEAGE_CHILDREN_KEY, value)

    @property
    def mesh_connectivity(self) -> Any:
        """Whether the mesh door reaches a peer, as it last said (None before it ever did; managers/mesh.py reads it
        as a record)."""
        return copy.deepcopy(self.get(MESH_CONNECTIVITY_KEY))

    @mesh_connectivity.setter
    def mesh_connectivity(self, value: Mapping[str, Any]) -> None:
        self.set(MESH_CONNECTIVITY_KEY, dict(value))

    @property
    def memory_manager_cursor(self) -> int:
        """The last memory the memory manager looked at (0: none)."""
        return int(self.get(MEMORY_MANAGER_CURSOR_KEY) or 0)

    @memory_manager_cursor.setter
    def memory_manager_cursor(self, value: int) -> None:
        self.set(MEMORY_MANAGER_CURSOR_KEY, value)

    @property
    def follow_up_cursor(self) -> int:
        """The last memory the memory index's follow-up looked at (0: none; memory/followup.py)."""
        return int(self.get(FOLLOW_UP_CURSOR_KEY) or 0)

    @follow_up_cursor.setter
    def follow_up_cursor(self, value: int) -> None:
        self.set(FOLLOW_UP_CURSOR_KEY, value)

    def abstract_request(self, thread_id: str) -> dict[str, Any] | None:
        """A thread's pending request for an abstract: {trigger, what}."""
        request: dict[str, Any] | None = self.get(ABSTRACT_REQUEST_PREFIX + thread_id)
        return request

    def set_abstract_request(self, thread_id: str, value: dict[str, Any] | None) -> None:
        self.set(ABSTRACT_REQUEST_PREFIX + thread_id, value)

    def preload_memory_upkeep(self, thread_id: str) -> None:
        """The keys the memory step reads (the thread's abstract request, the episode check), in one query."""
        self.preload(ABSTRACT_REQUEST_PREFIX + thread_id, EPISODES_CHECKED_KEY)

    def vector_database(self) -> str:
        """This database's own database on a Chroma server, named once: personas that share a server never share
        vectors."""
        name = self.get(VECTOR_DATABASE_KEY)
        if not name:
            name = f"persona_{uuid4().hex[:20]}"
            self.set(VECTOR_DATABASE_KEY, name)
        return str(name)
