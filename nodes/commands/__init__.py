"""Commands: the spec (spec.py), the parser for the three syntaxes (parser.py), the consent gate (consent.py) and one
module per family, listed here — a family exists because it is in `FAMILIES`, not because something imported it."""

from __future__ import annotations

from functools import cache
from typing import Any

from nodes.commands import (
    abstracts,
    agents,
    catalogues,
    concepts,
    config,
    cycle,
    diary,
    facts,
    goals,
    help,
    identity,
    llm_memory,
    llm_registry,
    mcp,
    memory,
    mesh,
    messages,
    notes,
    process,
    skills,
    spawn,
    stelis,
    strategies,
    tags,
    users,
    world,
)
from nodes.commands.model import Command
from nodes.commands.parser import ParseResult, parse_commands
from nodes.commands.spec import (
    PRIVILEGED,
    CommandContext,
    CommandError,
    CommandResult,
    CommandSpec,
    Effect,
    Family,
)

FAMILIES: tuple[Family, ...] = (
    help.FAMILY, messages.FAMILY, notes.FAMILY, identity.FAMILY, llm_memory.FAMILY, diary.FAMILY, concepts.FAMILY,
    goals.FAMILY, memory.FAMILY, facts.FAMILY, abstracts.FAMILY, tags.FAMILY, cycle.FAMILY, stelis.FAMILY,
    config.FAMILY, mcp.FAMILY, world.FAMILY, process.FAMILY,
    llm_registry.FAMILY, skills.FAMILY, strategies.FAMILY, spawn.FAMILY,
    catalogues.FAMILY, mesh.FAMILY, mesh.REPUTATION, agents.FAMILY, users.FAMILY,
)


class Registry:
    """Every command by type, and the aliases (Epos tool names, short forms) that resolve to one."""

    def __init__(self, families: tuple[Family, ...]):
        self.specs: dict[str, CommandSpec] = {}
        self.aliases: dict[str, str] = {}
        self.compact: dict[str, Family] = {}  # command type -> its family, for the families the guide keeps short
        self.family_of: dict[str, Family] = {}
        for family in families:
            for spec in family.specs:
                self.family_of[spec.type] = family
                if family.compact:
                    self.compact[spec.type] = family
                if spec.type in self.specs:
                    raise ValueError(f"command {spec.type} is declared twice")
                self.specs[spec.type] = spec
                for alias in spec.aliases:
                    if self.aliases.setdefault(alias, spec.type) != spec.type:
                        raise ValueError(f"alias {alias!r} names two commands")

        # the commands settings can turn off: the guide depends on the settings only through them, so it is built
        # once per (brief, their reasons) and kept (a tick's prompt asks for it every time)
        self._conditional = [spec for _, spec in sorted(self.specs.items()) if spec.unavailable is not None]
        self._guides: dict[tuple[bool, tuple[str | None, ...]], str] = {}

    def get(self, type_: str) -> CommandSpec | None:
        return self.specs.get(type_)

    def guide(self, only: str | None = None, settings: Any = None, brief: bool = False) -> str:
        """Every command's usage line (the prompt's guide; with `settings`, a command that cannot run says why), a
        compact family's commands as one line per prefix; `brief` (a small window): every family so but the
        ESSENTIAL commands; with `only` (a command or family), each match with its arguments as its model defines
        them (help.show)."""
        if only is None:
            key = (brief, tuple(spec.off_because(settings) for spec in self._conditional))
            text = self._guides.get(key)
            if text is None:
                text = self._guides[key] = self._full_guide(settings, brief)
            return text
        only = self.aliases.get(only.strip().lower(), only.strip().lower())
        lines_ = [f"- {spec.help()}" for t, spec in sorted(self.specs.items()) if t == only or t.startswith(f"{only}.")]
        return "\n".join(lines_) or f"no command matches {only!r}"

    def _full_guide(self, settings: Any, brief: bool) -> str:
        lines: dict[str, str] = {}
        grouped: dict[str, list[CommandSpec]] = {}
        for t, spec in sorted(self.specs.items()):
            if t in self.compact or (brief and t not in ESSENTIAL):
                grouped.setdefault(t.split(".", 1)[0], []).append(spec)
                continue
            why = spec.off_because(settings)
            lines[t] = f"- {t} {spec.usage}" + (f" — OFF: {why}" if why else "")
        for prefix, specs in grouped.items():
            verbs = "|".join(s.type.split(".", 1)[1] for s in specs)
            off = {s.type.split(".", 1)[1]: why for s in specs if (why := s.off_because(settings))}
            family = self.family_of[specs[0].type]
            about = family.abouts.get(prefix, family.about)
            if off and len(off) < len(specs):  # only some are off: say which
                about += " — OFF: " + "; ".join(f"{prefix}.{verb}: {why}" for verb, why in off.items())
            elif off:
                about += f" — OFF: {next(iter(off.values()))}"
            lines[prefix] = f'- {prefix}.{verbs} — {about} (help.show {{"command": "{prefix}"}} shows how)'
        return "\n".join(lines[k] for k in sorted(lines))


# what a persona needs word for word even when the window is small: talking, and finding out the rest
ESSENTIAL = frozenset({"messages.send", "help.show", "memory.search", "diary.add", "notes.read"})


@cache
def registry() -> Registry:
    return Registry(FAMILIES)


__all__ = ["FAMILIES", "PRIVILEGED", "Command", "CommandContext", "CommandError", "CommandResult", "CommandSpec",
           "Effect", "ParseResult", "Registry", "parse_commands", "registry"]
