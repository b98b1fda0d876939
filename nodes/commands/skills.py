"""skills: my skills (persona/skills.py). An `auto` skill is in every prompt; a `manual` one only as a line until I
read it: `skills.read {"name"}` puts its body into my next prompt(s) — `ticks` of them, 1 by default — cut to
`limits.skill_chars` (the loop manager keeps which are read: managers/loop.py). It only changes what I see, so it is
a `read`."""

from __future__ import annotations

from pydantic import Field

from nodes.commands.args import Args, Title, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("skills", "my skills", compact=True)


class SkillReadArgs(Args):
    name: Title = Field(validation_alias=names("name", "skill"))
    ticks: int = Field(1, ge=1, le=20)


@FAMILY.command("skills.list", "{}  (my skills; manual ones I read with skills.read)", effect="read", scoped=True)
def list_skills(cmd: Command, ctx: CommandContext) -> CommandResult:
    skills = ctx.services.persona.skills
    lines = [
        f"- {s.name} ({s.invocation}{', ' + format(len(s.body), ',') + ' chars' if s.invocation == 'manual' else ''})"
        f": {s.description}"
        for s in skills
    ]
    return CommandResult("\n".join(lines) or "I have no skills", show=True)


@FAMILY.command(
    "skills.read",
    '{"name": "research", "ticks": 1}  (puts a skill\'s instructions into my next prompt(s))',
    args=SkillReadArgs,
    effect="read",
)
def read_skill(cmd: Command, ctx: CommandContext) -> CommandResult:
    name = str(arg(cmd, "name"))
    skills = {s.name.lower(): s for s in ctx.services.persona.skills}
    skill = skills.get(name.lower())
    if skill is None:
        raise CommandError(
            f"skills.read: no skill {name!r}; mine: {', '.join(s.name for s in skills.values()) or 'none'}"
        )
    if skill.invocation == "auto":
        return CommandResult(f"skill {skill.name} is in every prompt already")
    ticks = arg(cmd, "ticks", default=1, kind=int)
    ctx.managers.loop.load_skill(ctx.thread_id, skill.name, tick=ctx.tick, ticks=ticks)
    limit = ctx.settings.limits.skill_chars
    cut = f" (cut to {limit:,} of its {len(skill.body):,} characters)" if len(skill.body) > limit else ""
    return CommandResult(f"skill {skill.name} is in my next {ticks} prompt(s){cut}")
