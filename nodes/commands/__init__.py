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
    thoughts,
    tools,
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
    help.FAMILY,
    messages.FAMILY,
    notes.FAMILY,
    identity.FAMILY,
    llm_memory.FAMILY,
    diary.FAMILY,
    concepts.FAMILY,
    goals.FAMILY,
    memory.FAMILY,
    facts.FAMILY,
    abstracts.FAMILY,
    tags.FAMILY,
    cycle.FAMILY,
    stelis.FAMILY,
    config.FAMILY,
    mcp.FAMILY,
    world.FAMILY,
    process.FAMILY,
    llm_registry.FAMILY,
    skills.FAMILY,
    strategies.FAMILY,
    spawn.FAMILY,
    catalogues.FAMILY,
    mesh.FAMILY,
    mesh.REPUTATION,
    agents.FAMILY,
    users.FAMILY,
    thoughts.FAMILY,
    tools.FAMILY,
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
        # once per (form, their reasons) and kept (a tick's prompt asks for it every time)
        self._conditional = [spec for _, spec in sorted(self.specs.items()) if spec.unavailable is not None]
        self._guides: dict[tuple[str, tuple[str | None, ...]], str] = {}
        self._families = families

    def get(self, type_: str) -> CommandSpec | None:
        return self.specs.get(type_)

    def guide(self, only: str | None = None, settings: Any = None, form: str = "full") -> str:
        """The prompt's guide in one of GUIDE_FORMS, largest first (with `settings`, a command that cannot run says
        why): `full`, every command's usage line but a compact family's, which gets one line per prefix; `brief`,
        every family so but the ESSENTIAL commands; `compact` (a small window), one line per family with its
        MOST_USED commands; `essential`, the ESSENTIAL commands' usage only. With `only` (a command or family), each
        match with its arguments as its model defines them (help.show)."""
        if only is None:
            if form not in GUIDE_FORMS:
                raise ValueError(f"form must be one of {', '.join(GUIDE_FORMS)}, got {form!r}")
            key = (form, tuple(spec.off_because(settings) for spec in self._conditional))
            text = self._guides.get(key)
            if text is None:
                text = self._guides[key] = (
                    self._family_guide(settings, essential_only=form == "essential")
                    if form in ("compact", "essential")
                    else self._full_guide(settings, form == "brief")
                )
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

    def _family_guide(self, settings: Any, essential_only: bool) -> str:
        """`essential_only`: the ESSENTIAL commands' usage. Otherwise one line per family: its name and its ESSENTIAL
        and MOST_USED commands, `…` when it has more; a command that cannot run now is left out (help.show says
        why), and so is a family with none left."""
        if essential_only:
            lines = []
            for t in sorted(ESSENTIAL):
                why = self.specs[t].off_because(settings)
                lines.append(f"- {t} {self.specs[t].usage}" + (f" — OFF: {why}" if why else ""))
            return "\n".join(lines)
        lines = []
        for family in self._families:
            types = [s.type for s in family.specs]
            shown = [t for t in types if t in ESSENTIAL] + [t for t in types if t in MOST_USED]
            shown = [t for t in shown if not self.specs[t].off_because(settings)]
            if shown:
                lines.append(f"- {family.name}: {', '.join(shown)}{', …' if len(shown) < len(types) else ''}")
        return "\n".join(lines)


# what a persona needs word for word even when the window is small: talking, and finding out the rest
ESSENTIAL = frozenset({"messages.send", "help.show", "memory.search", "diary.add", "notes.read"})
# the guide's forms, largest first: the prompt takes the largest that fits its share of the window
GUIDE_FORMS = ("full", "brief", "compact", "essential")
# the commands a small window's guide names for each family (the compact form): what the default persona's files
# and skills ask for (AGENTS.md, journaling, research) and each family's everyday verb; help.show gives the rest
MOST_USED = frozenset(
    {
        "notes.add",
        "core.update",
        "notepad.update",
        "llm_memory.add",
        "diary.search",
        "concepts.add",
        "goals.add",
        "tasks.add",
        "tasks.update",
        "memory.archive",
        "facts.verify",
        "abstracts.read",
        "tags.stats",
        "cycle.pause",
        "stelis.start",
        "stelis.end",
        "config.read",
        "mcp.call",
        "search.web",
        "feeds.fetch",
        "scripts.add",
        "process.start",
        "llm_task.ask",
        "skills.read",
        "stagnation_strategies.list",
        "persona.spawn",
        "agent_tables.add",
        "mesh.send",
        "reputation.show",
        "agents.list",
        "users.info",
    }
)


@cache
def registry() -> Registry:
    return Registry(FAMILIES)


__all__ = [
    "ESSENTIAL",
    "FAMILIES",
    "GUIDE_FORMS",
    "MOST_USED",
    "PRIVILEGED",
    "Command",
    "CommandContext",
    "CommandError",
    "CommandResult",
    "CommandSpec",
    "Effect",
    "ParseResult",
    "Registry",
    "parse_commands",
    "registry",
]
