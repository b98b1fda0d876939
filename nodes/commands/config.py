"""config (HMP): read and change the persona's tunable settings, kept in the `config` table."""

from __future__ import annotations

from typing import Any

from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandError, CommandResult, arg, command

# What the persona may change about itself; everything else (models, shell, paths) is the operator's.
EDITABLE = {
    "memory_manager.mode": ("standard", "concentration", "meditation", "aggressive_pruning", "lenient_pruning"),
    "memory_manager.novelty_threshold": float,
    "memory_manager.lru_limit": int,
    "memory_manager.emotion_weight": float,
    "memory_manager.goal_focus": float,
    "memory_manager.diversity_boost": float,
    "memory.recall_k": int,
    "memory.abstract_every": int,
    "memory.episode_days": int,
    "emotions": list,
}


def _coerce(key: str, value: Any) -> Any:
    rule = EDITABLE[key]
    if isinstance(rule, tuple):
        if value not in rule:
            raise CommandError(f"config.update: {key} must be one of {', '.join(rule)}")
        return value
    try:
        if rule is list:
            return value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
        return rule(value)
    except (TypeError, ValueError) as exc:
        raise CommandError(f"config.update: {key} must be {rule.__name__}, got {value!r}") from exc


@command("config.read", '{"key": "memory_manager.mode"}  (no key: every setting I may change)')
def read_config(cmd: Command, ctx: CommandContext) -> CommandResult:
    key = arg(cmd, "key", default=None)
    keys = [key] if key else sorted(EDITABLE)
    lines = [f"{k} = {ctx.repos.config.get(f'persona/{k}', '(default)')}" for k in keys]
    return CommandResult("\n".join(lines), show=True)


@command("config.update", '{"key": "memory_manager.mode", "value": "meditation"}')
def update_config(cmd: Command, ctx: CommandContext) -> CommandResult:
    key = str(arg(cmd, "key"))
    if key not in EDITABLE:
        raise CommandError(f"config.update: {key!r} is not something I may change; editable: {', '.join(sorted(EDITABLE))}")
    value = _coerce(key, cmd.args.get("value"))
    old = ctx.repos.config.get(f"persona/{key}")
    ctx.repos.config.set(f"persona/{key}", value)
    if key == "memory_manager.mode" and old != value:
        from memory.abstracts import request_abstract

        request_abstract(ctx.repos, ctx.root_thread or ctx.thread_id, "mode_change", f"{old} -> {value}")
    return CommandResult(f"{key} = {value}")
