"""config (HMP): read and change the persona's tunable settings.

Only the keys in `persona.settings.SELF_EDITABLE` are the persona's to change (models, paths, reflexes, consent
and everything else are the operator's). A request for another key, or for a value out of the setting's type and
bounds (`memory.recall_k` −5 or NaN, 1,000 emotions), is refused at admission with the reason the model reads —
never parked for an approval it could not use. An admitted change is validated again against the whole settings
model before it is stored (the persona's own change, by the persona manager: managers/persona.py). Changing a
setting is `modify_self`: it waits for the human's approval unless validators agree (+2).
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from managers.persona import setting_value
from nodes.commands.args import Args, Title
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from persona.settings import SELF_EDITABLE, Settings, SettingsError, check_self_change, load_settings

FAMILY = Family("config", "my tunable settings")


class ConfigReadArgs(Args):
    key: Title | None = None


class ConfigUpdateArgs(Args):
    key: Title
    value: Any  # checked against the setting's own type and bounds here, and the whole settings when applied

    @model_validator(mode="before")
    @classmethod
    def _mine_and_in_bounds(cls, data: Any) -> Any:
        """Refused at admission, not after an approval it could never use: a key the persona may not change, or a
        value out of the setting's bounds."""
        if isinstance(data, dict) and isinstance(data.get("key"), str) and "value" in data:
            key = data["key"].strip()
            try:
                return {**data, "key": key, "value": check_self_change(key, data["value"])}
            except SettingsError as exc:
                raise ValueError(str(exc)) from None
        return data


@FAMILY.command(
    "config.read",
    '{"key": "memory_manager.mode"}  (no key: every setting I may change)',
    args=ConfigReadArgs,
    effect="read",
)
def read_config(cmd: Command, ctx: CommandContext) -> CommandResult:
    key = arg(cmd, "key", default=None)
    if key is not None and key not in SELF_EDITABLE:
        raise CommandError(f"config.read: {key!r} is not one of my settings; mine: {', '.join(SELF_EDITABLE)}")
    keys = [key] if key else list(SELF_EDITABLE)
    return CommandResult("\n".join(f"{k} = {setting_value(ctx.settings, k)!r}" for k in keys), show=True)


@FAMILY.command(
    "config.update",
    '{"key": "memory_manager.mode", "value": "meditation"}  (needs my human\'s approval)',
    args=ConfigUpdateArgs,
    effect="modify_self",
    prompt_tier="settings",
)
def update_config(cmd: Command, ctx: CommandContext) -> CommandResult:
    key = str(arg(cmd, "key"))
    if key not in SELF_EDITABLE:
        raise CommandError(f"config.update: {key!r} is not something I may change; mine: {', '.join(SELF_EDITABLE)}")
    if "value" not in cmd.args:
        raise CommandError("config.update: missing argument 'value'")
    services = ctx.services

    def reload(changes: dict[str, Any]) -> Settings:
        return load_settings(
            self_changes=changes, overrides=services.overrides, recorded_persona_dir=str(services.persona.directory)
        )

    try:
        change = ctx.managers.persona.change_setting(
            key, cmd.args["value"], current=ctx.settings, reload=reload, thread_id=ctx.root_thread or ctx.thread_id
        )
    except SettingsError as exc:
        raise CommandError(f"config.update: {exc}") from None
    services.settings = change.settings
    return CommandResult(f"{key} = {change.value!r} (was {change.old!r})")
