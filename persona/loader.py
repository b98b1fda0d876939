"""Loading a persona directory: bootstrap files with size caps, skills, config.yaml, ethics.yaml, seed.txt.

Caps (FILE_CAP, TOTAL_CAP): each file ≤ 20,000 chars, cut at a line end and marked; ≤ 150,000 in total,
files past the total are dropped and listed in `Persona.truncated`; skills: see persona/skills.py.
`refresh_persona` reloads a persona whose files changed on disk (the next tick's prompt uses the edit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from persona.ethics import Ethics, EthicsError, load_ethics
from persona.skills import Skill, SkillError, load_skills
from persona.yaml_lines import UnreadableFile, YamlError, parse_lined_yaml, read_text

FILE_CAP = 20_000
TOTAL_CAP = 150_000
BOOTSTRAP_ORDER = (
    "IDENTITY.md",
    "SOUL.md",
    "TOOLS.md",
    "USER.md",
    "AGENTS.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
)
TRUNCATION_MARK = "\n[… truncated: file exceeds {cap} characters]"


class PersonaError(ValueError):
    """A persona directory or file that cannot be used; `directory` completes the bare file names in the message."""

    def __init__(self, message: str, directory: str | Path | None = None):
        super().__init__(message)
        self.directory = directory


def default_persona_dir() -> Path:
    return _default_dirs()[0]


@cache
def _default_dirs() -> tuple[Path, Path]:
    """The shipped persona's directory, and it resolved (asked every tick: `refresh_persona`)."""
    directory = Path(__file__).resolve().parent / "default"
    return directory, directory.resolve()


def cap_text(text: str, cap: int = FILE_CAP) -> tuple[str, bool]:
    """Cut `text` to at most `cap` chars at a line end, with a visible marker."""
    if len(text) <= cap:
        return text, False
    mark = TRUNCATION_MARK.format(cap=cap)
    room = cap - len(mark)
    cut = text.rfind("\n", 0, room)
    if cut <= 0:
        cut = room
    return text[:cut] + mark, True


@dataclass
class Persona:
    name: str
    directory: Path
    files: dict[str, str] = field(default_factory=dict)
    seed: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    ethics: Ethics = field(default_factory=Ethics)
    truncated: list[str] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    # (path, mtime, size) of every file read: a changed file means a reload
    signature: tuple[tuple[str, int | None, int | None], ...] = ()

    def file(self, name: str) -> str:
        return self.files.get(name, "")

    @property
    def display_name(self) -> str:
        return str(self.config.get("name") or self.name)


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except UnreadableFile as exc:
        raise PersonaError(str(exc)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return parse_lined_yaml(_read(path), str(path), empty_ok=True).data
    except YamlError as exc:
        raise PersonaError(str(exc), path.parent) from None


def skill_directories(root: Path, config: dict[str, Any]) -> list[Path]:
    """The shipped skills, then the persona's own, then config `skills_dirs` (relative to the persona)."""
    shipped, resolved = _default_dirs()
    dirs = [shipped / "skills"]
    if root.resolve() != resolved:
        dirs.append(root / "skills")
    named = config.get("skills_dirs")
    dirs += [(root / d) for d in named if isinstance(d, str)] if isinstance(named, list) else []
    return dirs


def _signature(root: Path, config: dict[str, Any]) -> tuple[tuple[str, int | None, int | None], ...]:
    base = str(root)
    paths = [os.path.join(base, n) for n in (*BOOTSTRAP_ORDER, "seed.txt", "config.yaml", "ethics.yaml")]
    for directory in skill_directories(root, config):
        paths += [str(p) for p in sorted(directory.glob("*/SKILL.md"))] if directory.is_dir() else []
    stats: list[tuple[str, int | None, int | None]] = []
    for path in paths:  # plain strings and os.stat: asked every tick
        try:
            st = os.stat(path)
            stats.append((path, st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            stats.append((path, None, None))
    return tuple(stats)


def refresh_persona(persona: Persona) -> Persona:
    """The same persona if nothing changed on disk, else a reloaded one. A broken edit keeps the old one
    (the error is raised to the caller, who logs it) — nothing is lost."""
    if _signature(persona.directory, persona.config) == persona.signature:
        return persona
    return load_persona(persona.directory)


def load_persona(directory: str | Path | None = None) -> Persona:
    root = Path(directory) if directory else default_persona_dir()
    if not root.is_dir():
        raise PersonaError(f"persona directory {root} does not exist")
    persona = Persona(name=root.name, directory=root.resolve())
    total = 0
    for name in BOOTSTRAP_ORDER:
        path = root / name
        if not path.exists():
            continue
        text, cut = cap_text(_read(path))
        if cut:
            persona.truncated.append(name)
        if total + len(text) > TOTAL_CAP:
            persona.truncated.append(f"{name} (dropped: total cap {TOTAL_CAP})")
            continue
        total += len(text)
        persona.files[name] = text
    seed_path = root / "seed.txt"
    if seed_path.exists():
        persona.seed, _ = cap_text(_read(seed_path))
    persona.config = _read_yaml(root / "config.yaml")
    try:
        persona.ethics = load_ethics(root / "ethics.yaml")
    except EthicsError as exc:
        raise PersonaError(str(exc), root) from exc
    try:
        persona.skills, left_out = load_skills(skill_directories(root, persona.config))
    except SkillError as exc:
        raise PersonaError(str(exc)) from exc
    persona.truncated += left_out
    persona.signature = _signature(root, persona.config)
    return persona
