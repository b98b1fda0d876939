"""A new persona directory: the default persona copied and renamed (`run.py persona new`, and the web app's
character-card import)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from persona.loader import Persona, PersonaError, default_persona_dir, load_persona

NAME_PATTERN = r"[\w][\w .-]{0,63}"
TEXT_SUFFIXES = (".md", ".yaml", ".txt")


def check_name(name: str) -> str:
    if not re.fullmatch(NAME_PATTERN, name or ""):
        raise PersonaError(f"{name!r} is not a usable name (letters, digits, space, . _ -; at most 64)")
    return name


def slug(name: str) -> str:
    """A directory name for a persona name (`Mira Vale` → `mira-vale`)."""
    return re.sub(r"[^\w.-]+", "-", name.strip().lower()).strip("-.") or "persona"


def free_directory(root: Path, name: str) -> Path:
    """`root/name`, or `root/name-2`, `-3`… when it is taken."""
    target, n = root / name, 1
    while target.exists():
        n += 1
        target = root / f"{name}-{n}"
    return target


def scaffold_persona(name: str, target: Path) -> Persona:
    """Copy the default persona to `target` (which must not exist), renamed to `name`."""
    check_name(name)
    if target.exists():
        raise PersonaError(f"{target} already exists; nothing was changed")
    shutil.copytree(default_persona_dir(), target)
    for path in target.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            path.write_text(path.read_text(encoding="utf-8").replace("Lumen", name), encoding="utf-8")
    return load_persona(target)
