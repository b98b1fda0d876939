"""Anonymisation on the human's request (HMP's long-term memory "может быть анонимизирована … пользователем").

Names, places and similar identifying words in the persona's memory are replaced by placeholders (`[PERSON_1]`,
`[PLACE_1]`, `[NAME_1]`): every editable memory tier (core memory, notepad, llm_memory, diary, concepts, links,
goals, tasks, episodes, entities, dream insights, facts, questions) and the abstracts, archived rows included, each
through its tier's own edit (so the search catalogue, the full-text index and the vectors follow), then the memory
history (its before/after values), so no change record keeps a name the rows no longer hold; then every other table
that keeps text (memory/repositories/scrub.py: notes, thoughts, ticks, the catalogue, process rows, approvals,
taints, live events, kept exports…), the rewritten catalogue items indexed again. What lives outside this unit of
work — the LangGraph checkpoints, Chroma's vectors, the kept documents, the SQLite files' free pages — the door
finishes once it has committed (graph/forgetting.py), with `Anonymised.change`.

What is replaced: the names the human gives, and — found offline — the capitalised names memory/retrieval/entities.py
extracts, the entity tier's people and places (with their aliases) and the people the persona knows; the persona's
own name, existing placeholders and what the human keeps (`keep`) are left alone. A kind comes from the entity
tier or the people table (person, place), else `NAME`.

Reversible only by the owner. The mapping (placeholder → original) never enters the database, a prompt, a page or an
export: it is encrypted (Fernet, from `cryptography`) into `<data dir>/secrets/anonymisation/<time>.enc` with a key in
`<data dir>/secrets/anonymisation.key`, both 0600 in a 0700 directory — where the API keys of added models live,
outside the persona archive, outside the database, and outside every jailed script's view (reach/sandbox.py binds only
its work directory). No persona command, page or API reads them; `run.py memory deanonymise` (the owner's terminal)
does, with the key file or one the owner moved away (`--key-file`). A copy of the mapping without the key reveals
nothing. The persona may ask for anonymisation (`memory.anonymise`, modify_self: it waits for the human's approval);
the human's own request is audited as the human's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken

from managers.models import SECRETS_DIR, write_secret
from memory.models import Abstract
from memory.retrieval.entities import MONTHS, extract
from memory.text import STOP_WORDS
from memory.tiers import TIERS, AnyTier, TierEdit

if TYPE_CHECKING:
    from managers import Managers

KEY_FILE = "anonymisation.key"
MAPS_DIR = "anonymisation"
PLACEHOLDER = re.compile(r"\[(PERSON|PLACE|NAME)_(\d+)\]")
KINDS = {"person": "PERSON", "place": "PLACE"}
TEXT_KINDS = ("text", "textarea", "list", "lines")
MIN_NAME = 2  # characters


class AnonymisationError(ValueError):
    """Nothing to restore, or the key does not open the mapping."""


@dataclass
class Anonymised:
    mapping: dict[str, str]  # original -> placeholder
    rows: int = 0  # memory rows changed
    history: int = 0  # history entries rewritten
    saved: Path | None = None  # the encrypted mapping
    tiers: dict[str, int] = field(default_factory=dict)  # rows changed per tier
    consumed: list[Path] = field(default_factory=list)  # restore: the mappings applied (`forget` them after commit)
    swept: dict[str, int] = field(default_factory=dict)  # rows rewritten per table beyond the tiers
    forgotten: dict[str, int] = field(default_factory=dict)  # signed rows deleted per table (they cannot change)
    reindexed: int = 0  # catalogue items whose full-text document and vector were queued again
    change: Callable[[Any], Any] | None = field(default=None, repr=False)  # for the stores beyond this unit
    finished: tuple[int, int] = (0, 0)  # the door's: (checkpoint rows rewritten, memories embedded again)

    @property
    def changed(self) -> bool:
        return bool(self.rows or self.history or self.swept or self.forgotten)

    def placeholders(self) -> list[str]:
        return sorted(set(self.mapping.values()), key=lambda p: (p.split("_")[0], int(p.strip("[]").split("_")[1])))


def replacer(mapping: dict[str, str], *, ignore_case: bool = True) -> Callable[[Any], Any]:
    """A function replacing every key of `mapping` (whole words, longest first) in a string, or in the strings of a
    list or dict, by its value."""
    if not mapping:
        return lambda value: value
    lookup = {k.lower() if ignore_case else k: v for k, v in mapping.items()}
    pattern = re.compile(
        r"(?<![\w\[])(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")(?![\w\]])",
        re.IGNORECASE if ignore_case else 0,
    )

    def replace(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: lookup[m.group(0).lower() if ignore_case else m.group(0)], value)
        if isinstance(value, list):
            return [replace(v) for v in value]
        if isinstance(value, dict):
            return {k: replace(v) for k, v in value.items()}
        return value

    return replace


def _looks_like_name(name: str, corpus: str) -> bool:
    """A name the extractor found is one when it is several words, or a single word written capitalised somewhere
    other than at a sentence's start and never in lower case ("Call Alice" is a name, not a call)."""
    if name.lower() in MONTHS:  # months and weekdays identify no one
        return False
    if " " in name.strip():
        return True
    if re.search(rf"(?<![\w\[]){re.escape(name.lower())}(?!\w)", corpus):
        return False
    for match in re.finditer(rf"(?<![\w\[]){re.escape(name)}(?!\w)", corpus, re.IGNORECASE):
        before = corpus[: match.start()].rstrip(" \"'(\u201c")
        if before and before[-1] not in ".!?:\n":
            return True
    return False


def _text_fields(tier: AnyTier) -> list[str]:
    return [f.name for f in tier.fields if f.kind in TEXT_KINDS]


class AnonymisationManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # ---- where the mapping lives (owner-only) ---------------------------------------------------------------------

    def secrets_dir(self) -> Path:
        settings = self.house.deps.settings
        return Path(settings.data_dir).expanduser() / SECRETS_DIR

    def key_path(self) -> Path:
        return self.secrets_dir() / KEY_FILE

    def _fernet(self, key_file: Path | None = None, *, create: bool = False) -> Fernet:
        path = key_file or self.key_path()
        if not path.exists():
            if not create:
                raise AnonymisationError(f"no key at {path}: only the owner's key file opens the mapping")
            write_secret(path.parent, path.name, Fernet.generate_key().decode("ascii"))
        return Fernet(path.read_bytes().strip())

    def _save(self, mapping: dict[str, str]) -> Path:
        token = self._fernet(create=True).encrypt(
            json.dumps({placeholder: original for original, placeholder in mapping.items()}, ensure_ascii=False).encode(
                "utf-8"
            )
        )
        stamp = self.house.deps.clock().strftime("%Y%m%dT%H%M%S%fZ")
        return write_secret(self.secrets_dir() / MAPS_DIR, f"{stamp}.enc", token.decode("ascii"))

    def saved_maps(self) -> list[Path]:
        folder = self.secrets_dir() / MAPS_DIR
        return sorted(folder.glob("*.enc")) if folder.is_dir() else []

    # ---- what is found --------------------------------------------------------------------------------------------

    def _records(self, tiers: Iterable[str] | None) -> Iterable[tuple[AnyTier, str, dict[str, Any]]]:
        """(tier, ref, its text fields) of every row of the editable tiers asked for, archived ones included."""
        for name in tiers or TIERS:
            tier = TIERS[name]
            fields = _text_fields(tier)
            if not tier.editable or not fields:
                continue
            if tier.versioned:  # core memory and the notepad: the current text
                refs = [tier.name]
            else:
                assert tier.model is not None
                refs = [str(i) for i in self.repos.history.ids(tier.model)]
            for ref in refs:
                record = tier.one(self.repos, ref)
                yield tier, ref, {f: record.fields.get(f) for f in fields}

    def _abstracts(self) -> list[Abstract]:
        return [self.repos.abstracts.get(i) for i in self.repos.history.ids(Abstract)]

    def _known_kinds(self) -> dict[str, str]:
        """Lower-cased name -> PERSON/PLACE, from the entity tier and the people table."""
        kinds: dict[str, str] = {}
        for entity in self.repos.entities.all(limit=100_000):
            kind = KINDS.get(entity.kind or "")
            if kind:
                for name in [entity.name, *(entity.aliases or [])]:
                    kinds[str(name).lower()] = kind
        for person in self.repos.people.all():
            if person.name:
                kinds.setdefault(person.name.lower(), "PERSON")
        for name, kind in list(kinds.items()):  # "Alice" of "Alice Moreau" is a person too
            for word in name.split():
                if len(word) >= MIN_NAME and word[:1].isalpha() and word not in STOP_WORDS:
                    kinds.setdefault(word, kind)
        return kinds

    def find(
        self,
        *,
        names: Iterable[str] = (),
        keep: Iterable[str] = (),
        tiers: Iterable[str] | None = None,
        auto: bool = True,
    ) -> dict[str, str]:
        """What would be replaced: original (as first written) -> its kind (PERSON, PLACE, NAME)."""
        tiers = list(tiers) if tiers else None
        kinds = self._known_kinds()
        kept = {k.strip().lower() for k in keep if k.strip()}
        texts: list[str] = []
        for _, _, fields in self._records(tiers):
            texts += [v if isinstance(v, str) else " ".join(map(str, v or [])) for v in fields.values()]
        if tiers is None or "abstract" in tiers:
            texts += [f"{a.title}\n{a.summary}\n{' '.join(map(str, a.tags or []))}" for a in self._abstracts()]
        if tiers is None:  # the conversation, the notes and every thought, as the search catalogue holds them
            texts += list(self.repos.scrub.texts("memory_items", ["author", "title", "text"]))
        corpus = "\n".join(texts)
        wanted: list[str] = [n.strip() for n in names if n.strip()]
        if auto:
            wanted += [name for name in kinds if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", corpus, re.IGNORECASE)]
            wanted += [e[2:] for e in extract(corpus) if e.startswith("n:") and _looks_like_name(e[2:], corpus)]
        found: dict[str, str] = {}
        for name in wanted:
            lowered = name.lower()
            if (
                len(lowered) < MIN_NAME
                or lowered in kept
                or PLACEHOLDER.search(name)
                or lowered in {f.lower() for f in found}
            ):
                continue
            surface = re.search(rf"(?<![\w\[])({re.escape(name)})(?![\w\]])", corpus, re.IGNORECASE)
            if surface is None and name not in names:
                continue
            found[surface.group(1) if surface else name] = kinds.get(lowered, "NAME")
        return found

    # ---- the change -----------------------------------------------------------------------------------------------

    def _numbered(self, found: dict[str, str], corpus_placeholders: Iterable[str]) -> dict[str, str]:
        """original -> placeholder, numbered after the placeholders memory already holds."""
        used: dict[str, int] = {}
        for text in corpus_placeholders:
            for kind, number in PLACEHOLDER.findall(text):
                used[kind] = max(used.get(kind, 0), int(number))
        mapping: dict[str, str] = {}
        for original, kind in found.items():
            used[kind] = used.get(kind, 0) + 1
            mapping[original] = f"[{kind}_{used[kind]}]"
        return mapping

    def _rewrite(self, change: Callable[[Any], Any], tiers: list[str] | None) -> tuple[int, dict[str, int]]:
        now = self.house.deps.clock()
        changed, per_tier = 0, dict[str, int]()
        for tier, ref, fields in list(self._records(tiers)):
            new = {name: change(value) for name, value in fields.items()}
            edit = {name: value for name, value in new.items() if value != fields[name]}
            if edit:
                parsed: TierEdit = tier.parse_edit(edit)
                tier.edit(self.repos, ref, parsed, now)
                changed += 1
                per_tier[tier.name] = per_tier.get(tier.name, 0) + 1
        if tiers is None or "abstract" in tiers:
            for row in self._abstracts():
                title, summary, tags = change(row.title), change(row.summary), change(list(row.tags or []))
                if (title, summary, tags) != (row.title, row.summary, list(row.tags or [])):
                    self.repos.abstracts.rewrite(row.id, title=title, summary=summary, tags=tags)
                    changed += 1
                    per_tier["abstract"] = per_tier.get("abstract", 0) + 1
        self.repos.session.flush()  # the history listener records these edits now, before the history is rewritten
        return changed, per_tier

    def anonymise(
        self,
        *,
        names: Iterable[str] = (),
        keep: Iterable[str] = (),
        tiers: Iterable[str] | None = None,
        auto: bool = True,
        dry_run: bool = False,
    ) -> Anonymised:
        """Replace what `find` finds; the mapping saved encrypted (owner-only) first. `dry_run`: only what would be."""
        tiers = list(tiers) if tiers else None
        for name in tiers or []:
            if name not in TIERS and name != "abstract":
                raise ValueError(f"tiers: no memory tier {name!r}")
        found = self.find(names=names, keep=keep, tiers=tiers, auto=auto)
        texts = [json.dumps(fields, ensure_ascii=False) for _, _, fields in self._records(tiers)]
        mapping = self._numbered(found, texts + [a.summary for a in self._abstracts()])
        result = Anonymised(mapping)
        if dry_run or not mapping:
            return result
        result.saved = self._save(mapping)
        change = replacer(mapping)
        result.rows, result.tiers = self._rewrite(change, tiers)
        result.history = self.repos.history.rewrite(change)
        self._everywhere(change, result)
        return result

    def _everywhere(self, change: Callable[[Any], Any], result: Anonymised) -> None:
        """Beyond the tiers: every other table that keeps text (memory/repositories/scrub.py) — notes, thoughts,
        ticks, the catalogue, process rows, approvals, taints, live events, exports kept —; the rewritten catalogue
        items indexed again (their full-text documents now, their vectors at the index's next sync), the full-text
        index merged so no old segment keeps a term. The checkpoints, the vectors and the files' free pages are the
        door's to finish once this unit has committed (graph/forgetting.py)."""
        swept = self.repos.scrub.sweep(change)
        result.swept, result.forgotten = swept.rows, swept.forgotten
        result.reindexed = self.repos.items.reindex(swept.items)
        self.repos.items.lexical.optimize()
        result.change = change

    def sweep(self, change: Callable[[Any], Any]) -> Anonymised:
        """Only the tables beyond the tiers, again: what the rest of a tick wrote after its `memory.anonymise` ran
        (its closing rows, a taint of what its prompt had read) holds the names that prompt held."""
        result = Anonymised({})
        self._everywhere(change, result)
        return result

    def saved_replacer(self, key_file: Path | None = None) -> Callable[[Any], Any]:
        """Every saved mapping as one change (original -> placeholder), for the stores a unit of work does not
        reach (the loop's checkpoints, after the tick that anonymised). AnonymisationError without a key."""
        fernet = self._fernet(key_file)
        mapping: dict[str, str] = {}
        for path in self.saved_maps():
            try:
                opened = json.loads(fernet.decrypt(path.read_bytes()))
            except InvalidToken:
                raise AnonymisationError(f"the key does not open {path.name}") from None
            for placeholder, original in opened.items():
                mapping.setdefault(original, placeholder)
        return replacer(mapping)

    def restore(self, *, key_file: Path | None = None) -> Anonymised:
        """The owner's way back: every saved mapping opened with the key, the placeholders replaced by the originals
        (the newest mapping first); `consumed` names the mappings, for `forget` once this unit has committed.
        AnonymisationError when there is none or the key does not open them."""
        maps = self.saved_maps()
        if not maps:
            raise AnonymisationError("nothing to restore: no saved mapping")
        fernet = self._fernet(key_file)
        reverse: dict[str, str] = {}
        for path in reversed(maps):
            try:
                opened = json.loads(fernet.decrypt(path.read_bytes()))
            except InvalidToken:
                raise AnonymisationError(f"the key does not open {path.name}") from None
            for placeholder, original in opened.items():
                reverse.setdefault(placeholder, original)
        change = replacer(reverse, ignore_case=False)
        result = Anonymised({original: placeholder for placeholder, original in reverse.items()})
        result.rows, result.tiers = self._rewrite(change, None)
        result.history = self.repos.history.rewrite(change)
        self._everywhere(change, result)
        result.consumed = maps
        return result

    @staticmethod
    def rewrite_kept_documents(change: Callable[[Any], Any], data_dir: str | Path) -> int:
        """The knowledge base's kept copies of text documents (and those waiting for the owner) rewritten in place,
        as their chunks were; a PDF cannot be rewritten and stays as it came (its chunks are rewritten). How many
        files changed. Run once the unit that rewrote the chunks has committed."""
        from managers.memory import UPLOAD_DIR

        folder = Path(data_dir).expanduser() / UPLOAD_DIR
        changed = 0
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if not path.is_file() or path.suffix.lower() == ".pdf":
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            new = change(text)
            if new != text:
                path.write_text(new, encoding="utf-8")
                changed += 1
        return changed

    @staticmethod
    def forget(maps: Iterable[Path]) -> None:
        """Remove mappings that were restored (after the restore committed: a rollback must not lose them)."""
        for path in maps:
            os.remove(path)


__all__ = ["AnonymisationError", "AnonymisationManager", "Anonymised", "replacer"]
