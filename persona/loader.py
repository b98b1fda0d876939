"""Loading a persona directory: bootstrap files with size caps, config.yaml, ethics.yaml, seed.txt.

Caps (DESIGN.md §3.1): each file ≤ 20,000 chars, cut at a line end and marked; ≤ 150,000 in total,
files past the total are dropped and listed in `Persona.truncated`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FILE_CAP = 20_000
TOTAL_CAP = 150_000
BOOTSTRAP_ORDER = ("IDENTITY.md", "SOUL.md", "TOOLS.md", "USER.md", "AGENTS.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md")
TRUNCATION_MARK = "\n[… truncated: file exceeds {cap} characters]"


class PersonaError(ValueError):
    pass


def default_persona_dir() -> Path:
    return Path(__file__).resolve().parent / "default"


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
    ethics: dict[str, Any] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)

    def file(self, name: str) -> str:
        return self.files.get(name, "")

    @property
    def display_name(self) -> str:
        return str(self.config.get("name") or self.name)


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise PersonaError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise PersonaError(f"{path}:1: expected a mapping at the top level, got {type(data).__name__}")
    return data


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
        text, cut = cap_text(path.read_text(encoding="utf-8"))
        if cut:
            persona.truncated.append(name)
        if total + len(text) > TOTAL_CAP:
            persona.truncated.append(f"{name} (dropped: total cap {TOTAL_CAP})")
            continue
        total += len(text)
        persona.files[name] = text
    seed_path = root / "seed.txt"
    if seed_path.exists():
        persona.seed, _ = cap_text(seed_path.read_text(encoding="utf-8"))
    persona.config = _read_yaml(root / "config.yaml")
    persona.ethics = _read_yaml(root / "ethics.yaml")
    return persona
