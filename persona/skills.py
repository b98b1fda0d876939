"""Skills: `skills/<dir>/SKILL.md` files with YAML frontmatter (claw0's SkillsManager).

    ---
    name: journaling
    description: Write an evening diary entry that future me can search.
    invocation: auto        # auto: the whole skill is in every prompt; manual: only its name and description
    ---
    (instructions in Markdown)

Directories are scanned in order and a later one overrides an earlier skill of the same name (the shipped
defaults, then the persona's own, then any `skills_dirs` from config.yaml). Caps: 150 skills and 30,000
characters of rendered skills; what does not fit is left out and reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from persona.yaml_lines import UnreadableFile, YamlError, parse_yaml, read_text

MAX_SKILLS = 150
MAX_SKILL_CHARS = 30_000
INVOCATIONS = ("auto", "manual")


class SkillError(ValueError):
    pass


@dataclass
class Skill:
    name: str
    description: str
    invocation: str
    body: str
    path: Path

    def render(self) -> str:
        if self.invocation == "manual":
            return f"- {self.name}: {self.description} (only when asked for it)"
        return f"### Skill: {self.name}\n{self.description}\n\n{self.body.strip()}".rstrip()


def parse_skill(path: Path) -> Skill:
    try:
        text = read_text(path)
    except UnreadableFile as exc:
        raise SkillError(str(exc)) from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{path}:1: a SKILL.md starts with a '---' line and YAML frontmatter")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillError(f"{path}:1: the frontmatter has no closing '---' line")
    try:
        meta = parse_yaml("\n".join(lines[1:end]), str(path), first_line=2) or {}
    except YamlError as exc:
        line, _, problem = str(exc).partition(":")[2].partition(" ")  # "SKILL.md:3 (yaml): …"
        raise SkillError(f"{path}:{line}: invalid YAML frontmatter: {problem.removeprefix('(yaml): ')}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{path}:2: the frontmatter must be a mapping")
    for key in ("name", "description"):
        if not str(meta.get(key) or "").strip():
            raise SkillError(f"{path}:2: field '{key}' is required")
    invocation = str(meta.get("invocation") or "auto").strip().lower()
    if invocation not in INVOCATIONS:
        raise SkillError(f"{path}:2: field 'invocation' must be one of {', '.join(INVOCATIONS)}, got {invocation!r}")
    return Skill(
        name=str(meta["name"]).strip(),
        description=" ".join(str(meta["description"]).split()),
        invocation=invocation,
        body="\n".join(lines[end + 1 :]),
        path=path,
    )


def load_skills(directories: list[Path]) -> tuple[list[Skill], list[str]]:
    """Skills by name (later directories win), within the caps; returns (skills, what was left out)."""
    by_name: dict[str, Skill] = {}
    for directory in directories:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*/SKILL.md")):
            skill = parse_skill(path)
            by_name[skill.name] = skill
    kept: list[Skill] = []
    left_out: list[str] = []
    total = 0
    for skill in sorted(by_name.values(), key=lambda s: s.name):
        size = len(skill.render()) + 2
        if len(kept) >= MAX_SKILLS:
            left_out.append(f"skill {skill.name} (more than {MAX_SKILLS} skills)")
        elif total + size > MAX_SKILL_CHARS:
            left_out.append(f"skill {skill.name} (skills exceed {MAX_SKILL_CHARS} characters)")
        else:
            kept.append(skill)
            total += size
    return kept, left_out


def skills_block(skills: list[Skill], brief: bool = False) -> str:
    """The prompt's skills: each auto skill in full, the manual ones as a line; `brief` (a small window): every skill
    as its name and description, skills.read has the rest."""
    if not skills:
        return ""
    if brief:
        return "# My skills (skills.read gives one in full)\n" + "\n".join(
            f"- {s.name}: {s.description}" + (" (only when asked for it)" if s.invocation == "manual" else "")
            for s in skills
        )
    auto = [s.render() for s in skills if s.invocation == "auto"]
    manual = [s.render() for s in skills if s.invocation == "manual"]
    parts = ["# My skills"] + auto
    if manual:
        parts.append("Other skills I have:\n" + "\n".join(manual))
    return "\n\n".join(parts)
